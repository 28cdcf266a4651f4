package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/idface/idface/config"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
)

// IDs lists the enrolled ids in increasing byte order: at most limit
// (1..protocol.MaxListIDs) of those after after ("" for the first page),
// and whether more follow; the next page starts after the last id
// returned. The entry answers from its row map; in a sharded cluster each
// of the entry's shards answers for its rows and the pages are merged
// here. Only an operator is told: ids are personal data.
func (c *Client) IDs(ctx context.Context, after string, limit int) ([]string, bool, error) {
	if limit < 1 || limit > protocol.MaxListIDs {
		return nil, false, notSent{fmt.Errorf("a page of %d ids: give 1..%d", limit, protocol.MaxListIDs)}
	}
	if after != "" {
		if err := protocol.CheckStoredID(after); err != nil {
			return nil, false, notSent{fmt.Errorf("after: %w", err)}
		}
	}
	if err := c.mayRead("list the enrolled ids"); err != nil {
		return nil, false, err
	}
	var ids []string
	more := false
	for _, to := range c.rowHolders() {
		resp, err := c.call(ctx, to, &protocol.ListIDs{After: after, Limit: uint32(limit)}, protocol.TIDList)
		if err != nil {
			return nil, false, c.notListed(to, "list ids", err)
		}
		page := resp.(*protocol.IDList)
		ids = append(ids, page.IDs...)
		more = more || page.More
	}
	slices.Sort(ids)
	if len(ids) > limit {
		ids, more = ids[:limit], true
	}
	return ids, more, nil
}

// Exists reports whether id is enrolled (live), as IDs would list it;
// operators only.
func (c *Client) Exists(ctx context.Context, id string) (bool, error) {
	if err := protocol.CheckStoredID(id); err != nil {
		return false, notSent{err}
	}
	if err := c.mayRead("ask whether an id is enrolled"); err != nil {
		return false, err
	}
	for _, to := range c.rowHolders() {
		resp, err := c.call(ctx, to, &protocol.HasID{ID: id}, protocol.THasIDOK)
		if err != nil {
			return false, c.notListed(to, "check ids", err)
		}
		if resp.(*protocol.HasIDOK).Enrolled {
			return true, nil
		}
	}
	return false, nil
}

// rowHolders are the servers whose rows are the cluster's: the entry, or
// in a sharded cluster the entry's shards (its coordinator holds none).
func (c *Client) rowHolders() []string {
	entry := c.Entry()
	if c.p.Shards() <= 1 {
		return []string{entry}
	}
	names := make([]string, c.p.Shards())
	for s := range names {
		names[s] = config.ShardName(entry, s)
	}
	return names
}

// mayRead refuses, before sending, an operator's read of the ids from a
// member whose role the servers refuse it to.
func (c *Client) mayRead(what string) error {
	switch r := c.role(); r {
	case network.RoleDevice, network.RoleHelper:
		return notSent{fmt.Errorf("%s (%s) may not %s: ids are personal data, told to operators only; use an operator's identity (idface client init --role operator)", c.name, r, what)}
	}
	return nil
}

// notListed explains a refusal of ListIDs or HasID to an operator: a
// server of a build older than these messages routes neither and refuses
// them as a type its sender may not send.
func (c *Client) notListed(to, what string, err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeForbidden && c.role() != network.RoleDevice && c.role() != network.RoleHelper {
		return fmt.Errorf("%s does not %s (a build older than this client's, or a server that holds no rows): upgrade it (%w)", to, what, err)
	}
	return fmt.Errorf("%s: %w", to, err)
}
