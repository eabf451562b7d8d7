package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/strictjson"
)

// A consolidation replacement under way (snapshot.State.Replacing) is one
// REPLACE#<id> item whose replacement attribute holds it as JSON. It is
// written and compared whole: a replacement changes only by starting,
// draining (and moving its drained time on while its old nodes drain),
// being given up or its hold ending, never field by field.
const (
	replacePrefix   = "REPLACE#"
	attrReplacement = "replacement"
)

// maxReplacements bounds the replacements one cluster keeps; more in the
// table is taken for damage, not for a plan (the planner starts a handful).
const maxReplacements = 1000

// encodeReplacement is the stored form: compact JSON with the times in
// UTC, so equal replacements encode to equal strings. A replacement not
// yet drained has neither drained nor receivers, as before they existed.
func encodeReplacement(r snapshot.Replacement) (string, error) {
	r.Since, r.Drained = r.Since.UTC(), r.Drained.UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encode replacement: %w", err)
	}
	return string(b), nil
}

// decodeReplacement reads the stored form strictly (exact keys, none twice,
// nothing after) and checks it as a snapshot's would be.
func decodeReplacement(s string) (snapshot.Replacement, error) {
	var r snapshot.Replacement
	if err := strictjson.Decode([]byte(s), &r); err != nil {
		return snapshot.Replacement{}, err
	}
	if err := r.Validate(); err != nil {
		return snapshot.Replacement{}, err
	}
	r.Since, r.Drained = r.Since.UTC(), r.Drained.UTC()
	return r, nil
}

// optDoc is a stored replacement that may be absent, in its stored form.
type optDoc struct {
	s  string
	ok bool
}

// replaceChange is one REPLACE# item going from prev to next.
type replaceChange struct {
	id         string
	prev, next optDoc
}

func (c replaceChange) sk() string { return replacePrefix + c.id }

// diffReplacing lists the replacements that differ between prev and next,
// sorted by ID.
func diffReplacing(prev, next snapshot.State) ([]replaceChange, error) {
	ids := map[string]bool{}
	for id := range prev.Replacing {
		ids[id] = true
	}
	for id := range next.Replacing {
		ids[id] = true
	}
	lookupDoc := func(m map[string]snapshot.Replacement, id string) (optDoc, error) {
		r, ok := m[id]
		if !ok {
			return optDoc{}, nil
		}
		s, err := encodeReplacement(r)
		return optDoc{s: s, ok: true}, err
	}
	var changes []replaceChange
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if id == "" {
			return nil, errors.New("a replacement's ID is empty")
		}
		if r, ok := next.Replacing[id]; ok {
			if err := r.Validate(); err != nil {
				return nil, fmt.Errorf("replacement %s: %w", id, err)
			}
		}
		p, err := lookupDoc(prev.Replacing, id)
		if err != nil {
			return nil, err
		}
		n, err := lookupDoc(next.Replacing, id)
		if err != nil {
			return nil, err
		}
		if p != n {
			changes = append(changes, replaceChange{id: id, prev: p, next: n})
		}
	}
	return changes, nil
}

// loadReplacing reads the REPLACE# items into st.Replacing.
func (s *DynamoDB) loadReplacing(ctx context.Context, st *snapshot.State) error {
	return s.query(ctx, "load state of", replacePrefix, func(id string, item map[string]types.AttributeValue) error {
		if len(st.Replacing) >= maxReplacements {
			return fmt.Errorf("more than %d replacements under way", maxReplacements)
		}
		v, ok := item[attrReplacement].(*types.AttributeValueMemberS)
		if !ok {
			return fmt.Errorf("attribute %s is missing or not a string", attrReplacement)
		}
		r, err := decodeReplacement(v.Value)
		if err != nil {
			return fmt.Errorf("attribute %s: %w", attrReplacement, err)
		}
		if st.Replacing == nil {
			st.Replacing = map[string]snapshot.Replacement{}
		}
		st.Replacing[id] = r
		return nil
	})
}

// writeReplacement puts or deletes one REPLACE# item, on condition that it
// holds prev's replacement or already next's.
func (s *DynamoDB) writeReplacement(ctx context.Context, c replaceChange) error {
	e := newExpr()
	name := e.name(attrReplacement)
	match := func(o optDoc) string {
		if !o.ok {
			return "attribute_not_exists(" + name + ")"
		}
		return name + " = " + e.value(&types.AttributeValueMemberS{Value: o.s})
	}
	cond := aws.String("(" + match(c.prev) + " OR " + match(c.next) + ")")
	if !c.next.ok {
		_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 aws.String(s.table),
			Key:                       s.key(c.sk()),
			ConditionExpression:       cond,
			ExpressionAttributeNames:  e.names,
			ExpressionAttributeValues: e.valuesOrNil(),
		})
		if err != nil {
			return fmt.Errorf("delete %s: %w", c.sk(), err)
		}
		return nil
	}
	item := s.key(c.sk())
	item[attrReplacement] = &types.AttributeValueMemberS{Value: c.next.s}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      item,
		ConditionExpression:       cond,
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.valuesOrNil(),
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", c.sk(), err)
	}
	return nil
}

// saveReplacing applies the replacement changes to the Memory store; the
// caller holds m.mu. It returns the sort keys left alone as conflicts.
func (m *Memory) saveReplacing(changes []replaceChange) ([]string, error) {
	var conflicts []string
	for _, c := range changes {
		cur := optDoc{}
		if r, ok := m.state.Replacing[c.id]; ok {
			s, err := encodeReplacement(r)
			if err != nil {
				return nil, err
			}
			cur = optDoc{s: s, ok: true}
		}
		if cur != c.prev && cur != c.next {
			conflicts = append(conflicts, c.sk())
			continue
		}
		if !c.next.ok {
			delete(m.state.Replacing, c.id)
			continue
		}
		r, err := decodeReplacement(c.next.s)
		if err != nil {
			return nil, err
		}
		if m.state.Replacing == nil {
			m.state.Replacing = map[string]snapshot.Replacement{}
		}
		m.state.Replacing[c.id] = r
	}
	return conflicts, nil
}
