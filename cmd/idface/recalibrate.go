package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
)

// clusterRecalibrate gives a local cluster a new calibration: a new
// version of DIR/cluster.json (the serial raised, as 'cluster assemble'
// over an existing file makes one) whose threshold is the file's, and the
// servers that ran restarted on it, since a server reads its
// configuration when it starts.
func clusterRecalibrate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cluster recalibrate", "idface cluster recalibrate --cluster DIR --calibration calibration.json [--timeout 60s]\n\n"+
		"Replaces a local cluster's threshold with the one of a file from 'idface\n"+
		"calibrate' (on your own labelled features, for the number of ids you will\n"+
		"hold: --rows). The file must calibrate the cluster's transform (d, alpha,\n"+
		"beta, blind mode's levels), which its enrolled data follows. Writes\n"+
		"DIR/cluster.json with the serial raised and restarts the servers that\n"+
		"were running (all stopped, then started, since servers of one cluster\n"+
		"must run one configuration) and waits until they are healthy; the\n"+
		"enrolled ids stay. Stopped servers take it when they start.\n\n"+
		"A deployment does the same with its members' descriptors: idface cluster\n"+
		"assemble --out cluster.json --calibration FILE A.pub.json ..., then\n"+
		"every server restarted on the new file (docs/DEPLOY.md).", stderr)
	dir := clusterDirFlag(fs, "local cluster directory")
	cal := fs.String("calibration", "", "a file from 'idface calibrate' for the cluster's transform")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the restarted servers to be healthy")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := requireCluster(fs, dir); err != nil {
		return err
	}
	if err := required(fs, "calibration"); err != nil {
		return err
	}
	cfg, err := config.Load(*dir)
	if err != nil {
		return err
	}
	old := cfg.Literal()
	lit := old
	lit.Tau, lit.Calibration = nil, nil
	if err := applyCalibration(*cal, &lit, map[string]bool{}); err != nil {
		return err
	}
	if lit.Dim != old.Dim || lit.Alpha != old.Alpha || lit.Beta != old.Beta ||
		(cfg.Spec().Levels && (lit.GalleryLevels != old.GalleryLevels || lit.QueryLevels != old.QueryLevels)) {
		g, q := cfg.Transform()
		return fmt.Errorf("%s calibrates d = %d, gallery %s, query %s, but the cluster's data follows d = %d, gallery %s, query %s: calibrate again with --mode %s --alpha %d --beta %d%s",
			*cal, lit.Dim, lit.Calibration.GalleryLevels, lit.Calibration.QueryLevels, old.Dim, g, q, old.Mode, old.Alpha, old.Beta, calibrateLevelFlags(cfg))
	}
	lit.GalleryLevels, lit.QueryLevels = old.GalleryLevels, old.QueryLevels
	lit.Serial = old.Serial + 1
	if _, err := config.New(lit, *dir); err != nil {
		return fmt.Errorf("%s: %w", *cal, err)
	}
	var running []string
	for _, name := range cluster.ServerNames(cfg) {
		if _, ok := cluster.Running(cfg, name); ok {
			running = append(running, name)
		}
	}
	if err := config.SaveFile(filepath.Join(*dir, config.File), lit); err != nil {
		return err
	}
	next, err := config.Load(*dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cluster %s: serial %d, %s\n", *dir, next.Serial(), thresholdMeaning(next))
	fmt.Fprintf(stdout, "  was: tau = %.4f (score >= %d)\n", cfg.Tau(), cfg.Threshold())
	if len(running) == 0 {
		fmt.Fprintf(stdout, "no server was running: they take it when started (idface cluster up --cluster %s)\n", *dir)
		return nil
	}
	for _, name := range running {
		if err := cluster.Stop(cfg, name, 15*time.Second); err != nil {
			return fmt.Errorf("stopping %s: %w", name, err)
		}
	}
	if _, err := startLocal(next, running, *timeout); err != nil {
		return fmt.Errorf("the new configuration is written, but restarting the servers failed (idface cluster up --cluster %s starts them): %w", *dir, err)
	}
	fmt.Fprintf(stdout, "restarted %d servers on serial %d; all healthy\n", len(running), next.Serial())
	return nil
}

// calibrateLevelFlags are calibrate's level flags for cfg's transform, in a mode
// that takes levels.
func calibrateLevelFlags(cfg *config.Params) string {
	if !cfg.Spec().Levels {
		return ""
	}
	g, q := cfg.Transform()
	return fmt.Sprintf(" --gallery-levels %s --query-levels %s", g, q)
}
