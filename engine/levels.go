package engine

import (
	"sync"

	"github.com/idface/idface/template"
)

// LevelTransformers pools multi-level transformers (one per goroutine).
type LevelTransformers struct {
	pool sync.Pool
}

// NewLevelTransformers returns a pool for the levels lv on dimension d.
func NewLevelTransformers(d int, lv template.Levels) (*LevelTransformers, error) {
	if _, err := template.NewLevelTransformer(d, lv); err != nil {
		return nil, err
	}
	t := &LevelTransformers{}
	t.pool.New = func() any {
		tr, _ := template.NewLevelTransformer(d, lv)
		return tr
	}
	return t, nil
}

// Get takes a transformer; Put returns it.
func (t *LevelTransformers) Get() *template.LevelTransformer {
	return t.pool.Get().(*template.LevelTransformer)
}
func (t *LevelTransformers) Put(tr *template.LevelTransformer) { t.pool.Put(tr) }
