package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// The data layout of Redis in Action §6.2:
//
//	users:<id>      hash {name, funds}
//	inventory:<id>  set of item ids
//	market:         zset, member "<item id>.<seller id>", score the price
//
// Item ids are unique across sellers ("<seller id>-<n>"), so a buyer's
// inventory set never merges two items and every item can be traced to
// exactly one place. A price is a function of the item id, so the ledger
// can be re-derived from where the items ended up (see invariants.go).
const marketKey = "market:"

func userKey(id string) string      { return "users:" + id }
func inventoryKey(id string) string { return "inventory:" + id }

func sellerID(i int) string { return "s" + strconv.Itoa(i) }
func buyerID(i int) string  { return "b" + strconv.Itoa(i) }

func itemID(seller string, n int) string { return seller + "-" + strconv.Itoa(n) }

// sellerOfItem is the seller that created item, or "" if item was not
// made by itemID.
func sellerOfItem(item string) string {
	i := strings.LastIndexByte(item, '-')
	if i <= 0 {
		return ""
	}
	if _, err := strconv.Atoi(item[i+1:]); err != nil {
		return ""
	}
	return item[:i]
}

func marketMember(item, seller string) string { return item + "." + seller }

// splitMember undoes marketMember. Item ids hold no dot, so the last dot
// separates them.
func splitMember(member string) (item, seller string, ok bool) {
	i := strings.LastIndexByte(member, '.')
	if i <= 0 || i == len(member)-1 {
		return "", "", false
	}
	return member[:i], member[i+1:], true
}

// priceOf is item's price, 1..maxPrice: a hash of the id, so it needs no
// storage besides the market's score and can be checked afterwards.
func priceOf(item string, maxPrice int) int64 {
	h := fnv.New32a()
	h.Write([]byte(item))
	return 1 + int64(h.Sum32()%uint32(maxPrice))
}

// offer is one listing a buyer saw in the market.
type offer struct {
	member, item, seller string
	price                int64
}

func offerFrom(z rueidis.ZScore) (offer, bool) {
	item, seller, ok := splitMember(z.Member)
	return offer{member: z.Member, item: item, seller: seller, price: int64(z.Score)}, ok
}

// createUsers writes every user's hash: sellers start with no money,
// buyers with funds.
func createUsers(ctx context.Context, rc rueidis.Client, sellers, buyers []string, funds int64) error {
	cmds := make(rueidis.Commands, 0, len(sellers)+len(buyers))
	add := func(id string, funds int64) {
		cmds = append(cmds, rc.B().Hset().Key(userKey(id)).FieldValue().
			FieldValue("name", id).FieldValue("funds", strconv.FormatInt(funds, 10)).Build())
	}
	for _, id := range sellers {
		add(id, 0)
	}
	for _, id := range buyers {
		add(id, funds)
	}
	for _, r := range rc.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("creating the users: %w", err)
		}
	}
	return nil
}

func ids(n int, id func(int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = id(i + 1)
	}
	return out
}
