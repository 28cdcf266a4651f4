package party

import (
	"context"
	"fmt"

	"github.com/idface/idface/protocol"
	"github.com/idface/idface/transport"
)

// Client is a device talking to the cluster through one entry party, with
// a client identity pinned in the cluster config.
type Client struct {
	cfg   *Config
	d     *transport.Dialer
	entry Member
}

// NewClient connects as the named client (the first one when empty)
// through the named entry party (the first one when empty).
func NewClient(cfg *Config, client, entry string) (*Client, error) {
	if len(cfg.Clients) == 0 {
		return nil, fmt.Errorf("the cluster config lists no client identity")
	}
	me := cfg.Clients[0]
	if client != "" {
		found := false
		for _, c := range cfg.Clients {
			if c.Name == client {
				me, found = c, true
			}
		}
		if !found {
			return nil, fmt.Errorf("no client %q in the cluster config", client)
		}
	}
	cert, _, err := transport.LoadCertificate(cfg.Path(me.Cert), cfg.Path(me.Key))
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, d: transport.NewDialer(cert), entry: cfg.Parties[0]}
	if entry != "" {
		k := cfg.PartyIndex(entry)
		if k < 0 {
			return nil, fmt.Errorf("no party %q in the cluster config", entry)
		}
		c.entry = cfg.Parties[k]
	}
	return c, nil
}

// Close closes the connections.
func (c *Client) Close() { c.d.Close() }

// Entry names the entry party.
func (c *Client) Entry() string { return c.entry.Name }

// Enroll enrolls a batch atomically: every id at every party, or none.
func (c *Client) Enroll(ctx context.Context, items []protocol.Item) error {
	resp, _, err := call(ctx, c.d, c.entry, &protocol.Enroll{Items: items})
	if err != nil {
		return err
	}
	if ok, isOK := resp.(*protocol.EnrollOK); !isOK || int(ok.Count) != len(items) {
		return fmt.Errorf("unexpected answer %T to an enrollment", resp)
	}
	return nil
}

// Identify returns the top k candidates for a template.
func (c *Client) Identify(ctx context.Context, tmpl []float32, k int) (*protocol.IdentifyOK, error) {
	resp, _, err := call(ctx, c.d, c.entry, &protocol.Identify{TopK: uint16(k), Template: tmpl})
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*protocol.IdentifyOK)
	if !ok {
		return nil, fmt.Errorf("unexpected answer %T to an identification", resp)
	}
	return r, nil
}

// Delete revokes id at every party.
func (c *Client) Delete(ctx context.Context, id string) error {
	resp, _, err := call(ctx, c.d, c.entry, &protocol.Delete{ID: id})
	if err != nil {
		return err
	}
	if _, ok := resp.(*protocol.DeleteOK); !ok {
		return fmt.Errorf("unexpected answer %T to a deletion", resp)
	}
	return nil
}

// Health asks party k for its state.
func (c *Client) Health(ctx context.Context, k int) (*protocol.HealthOK, error) {
	return c.HealthOf(ctx, c.cfg.Parties[k])
}

// HealthOf asks any server of the cluster (a party or the key server).
func (c *Client) HealthOf(ctx context.Context, m Member) (*protocol.HealthOK, error) {
	resp, _, err := call(ctx, c.d, m, &protocol.Health{})
	if err != nil {
		return nil, err
	}
	h, ok := resp.(*protocol.HealthOK)
	if !ok {
		return nil, fmt.Errorf("unexpected answer %T to a health check", resp)
	}
	return h, nil
}
