package cluster

import (
	"fmt"
	"slices"
)

// SlotID names one task slot: a TaskManager instance and the slot's index
// in it, from 0.
type SlotID struct {
	Instance string
	Index    int
}

func (s SlotID) String() string { return fmt.Sprintf("%s/%d", s.Instance, s.Index) }

// SlotPool is the JobManager's pure bookkeeping of task slots: the slots
// each registered TaskManager instance offers and which are allocated, to
// whom. It reads no clock and starts nothing.
//
// The membership service adds an instance's slots when it registers and
// removes them when it is lost, so that total and free slots are what the
// REST API reports; the job scheduler allocates the slots of each attempt
// (AllocateOn) and releases them when it ends (Release).
type SlotPool struct {
	order []string // instances in the order they were added
	tms   map[string][]string
}

// NewSlotPool returns an empty pool.
func NewSlotPool() *SlotPool { return &SlotPool{tms: map[string][]string{}} }

// Add offers instance's n slots, all free. An instance is added once.
func (p *SlotPool) Add(instance string, n int) error {
	if n < 1 {
		return fmt.Errorf("slot pool: instance %s offers %d slots: it must offer at least 1", instance, n)
	}
	if _, ok := p.tms[instance]; ok {
		return fmt.Errorf("slot pool: instance %s is already in the pool", instance)
	}
	p.tms[instance] = make([]string, n)
	p.order = append(p.order, instance)
	return nil
}

// Remove takes instance's slots out of the pool and returns the owners of
// the slots it held, sorted, each once: they lost a slot.
func (p *SlotPool) Remove(instance string) (lostOwners []string) {
	slots, ok := p.tms[instance]
	if !ok {
		return nil
	}
	for _, o := range slots {
		if o != "" && !slices.Contains(lostOwners, o) {
			lostOwners = append(lostOwners, o)
		}
	}
	delete(p.tms, instance)
	p.order = slices.DeleteFunc(p.order, func(s string) bool { return s == instance })
	slices.Sort(lostOwners)
	return lostOwners
}

// Allocate gives owner n free slots, spread evenly: each slot comes from
// the instance with the most free slots (the earliest added on a tie). It
// allocates nothing and fails, saying how many are free, when fewer than n
// are.
func (p *SlotPool) Allocate(owner string, n int) ([]SlotID, error) {
	if owner == "" || n < 1 {
		return nil, fmt.Errorf("slot pool: allocate needs an owner and at least 1 slot (owner %q, %d slots)", owner, n)
	}
	if free := p.Free(); free < n {
		return nil, fmt.Errorf("waiting for %d slots, %d free of %d registered on %d TaskManagers", n, free, p.Total(), len(p.order))
	}
	freeOf := map[string]int{}
	for _, inst := range p.order {
		freeOf[inst] = countFree(p.tms[inst])
	}
	var out []SlotID
	for range n {
		best := ""
		for _, inst := range p.order {
			if freeOf[inst] > 0 && (best == "" || freeOf[inst] > freeOf[best]) {
				best = inst
			}
		}
		slots := p.tms[best]
		i := slices.Index(slots, "")
		slots[i] = owner
		freeOf[best]--
		out = append(out, SlotID{Instance: best, Index: i})
	}
	return out, nil
}

// AllocateOn gives owner n free slots of instance (the scheduler's
// placement chose it), the lowest free indexes first. It allocates nothing
// and fails, saying how many are free, when instance has fewer than n
// free or is not in the pool.
func (p *SlotPool) AllocateOn(owner, instance string, n int) ([]SlotID, error) {
	if owner == "" || n < 1 {
		return nil, fmt.Errorf("slot pool: allocate needs an owner and at least 1 slot (owner %q, %d slots)", owner, n)
	}
	slots, ok := p.tms[instance]
	if !ok {
		return nil, fmt.Errorf("slot pool: instance %s is not in the pool", instance)
	}
	if free := countFree(slots); free < n {
		return nil, fmt.Errorf("slot pool: instance %s has %d free slots of %d, %d wanted", instance, free, len(slots), n)
	}
	var out []SlotID
	for i, o := range slots {
		if o == "" && len(out) < n {
			slots[i] = owner
			out = append(out, SlotID{Instance: instance, Index: i})
		}
	}
	return out, nil
}

// Release frees every slot owner holds and returns how many.
func (p *SlotPool) Release(owner string) int {
	n := 0
	for _, slots := range p.tms {
		for i, o := range slots {
			if o == owner {
				slots[i] = ""
				n++
			}
		}
	}
	return n
}

// Slots returns instance's total and free slots.
func (p *SlotPool) Slots(instance string) (total, free int, ok bool) {
	slots, ok := p.tms[instance]
	return len(slots), countFree(slots), ok
}

// Held is the number of instance's slots that owner holds.
func (p *SlotPool) Held(instance, owner string) int {
	n := 0
	for _, o := range p.tms[instance] {
		if o == owner && owner != "" {
			n++
		}
	}
	return n
}

// Total is the number of slots of every instance.
func (p *SlotPool) Total() int {
	n := 0
	for _, s := range p.tms {
		n += len(s)
	}
	return n
}

// Free is the number of free slots of every instance.
func (p *SlotPool) Free() int {
	n := 0
	for _, s := range p.tms {
		n += countFree(s)
	}
	return n
}

// Instances are the instances in the pool, in the order they were added.
func (p *SlotPool) Instances() []string { return slices.Clone(p.order) }

func countFree(slots []string) int {
	n := 0
	for _, o := range slots {
		if o == "" {
			n++
		}
	}
	return n
}
