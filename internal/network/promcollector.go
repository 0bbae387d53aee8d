package network

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// ChannelInfo describes one live channel of a node.
type ChannelInfo struct {
	Name string
	// Direction is "out" for an output channel, "in" for an input channel.
	Direction string
	// Peer is the address of the process at the other end; "" for an
	// output channel no consumer has requested yet.
	Peer  string
	Stats ChannelStats
}

// Channels lists the node's live channels: the output channels registered
// and not closed, and the input channels neither finished nor failed.
func (n *Node) Channels() []ChannelInfo {
	n.mu.Lock()
	outs := make([]*outChan, 0, len(n.outputs))
	for _, o := range n.outputs {
		outs = append(outs, o)
	}
	ins := make([]*inChan, 0, len(n.inputs))
	for in := range n.inputs {
		ins = append(ins, in)
	}
	n.mu.Unlock()
	infos := make([]ChannelInfo, 0, len(outs)+len(ins))
	for _, o := range outs {
		o.mu.Lock()
		peer := ""
		if o.conn != nil {
			peer = o.conn.peer
		}
		o.mu.Unlock()
		infos = append(infos, ChannelInfo{Name: o.name, Direction: "out", Peer: peer, Stats: o.m.Snapshot()})
	}
	for _, in := range ins {
		infos = append(infos, ChannelInfo{Name: in.name, Direction: "in", Peer: in.conn.peer, Stats: in.m.Snapshot()})
	}
	sort.Slice(infos, func(i, j int) bool {
		if infos[i].Name != infos[j].Name {
			return infos[i].Name < infos[j].Name
		}
		return infos[i].Direction < infos[j].Direction
	})
	return infos
}

const channelPrefix = "weir_taskmanager_network_channel_"

var (
	channelLabels     = []string{"channel", "direction", "peer"}
	descBuffersOut    = prometheus.NewDesc(channelPrefix+"numBuffersOut", "Buffer frames sent on the channel.", channelLabels, nil)
	descBytesOut      = prometheus.NewDesc(channelPrefix+"numBytesOut", "Payload bytes sent on the channel.", channelLabels, nil)
	descBuffersIn     = prometheus.NewDesc(channelPrefix+"numBuffersIn", "Buffer frames received on the channel.", channelLabels, nil)
	descBytesIn       = prometheus.NewDesc(channelPrefix+"numBytesIn", "Payload bytes received on the channel.", channelLabels, nil)
	descCredit        = prometheus.NewDesc(channelPrefix+"credit", "Sender: credit left. Receiver: free buffers, all granted as credit.", channelLabels, nil)
	descBacklog       = prometheus.NewDesc(channelPrefix+"backlog", "Sender: buffers queued for credit. Receiver: the backlog the sender last announced.", channelLabels, nil)
	descBackPressured = prometheus.NewDesc(channelPrefix+"accumulatedBackPressuredTimeMs", "Time the producer waited for credit (a free sender buffer), in milliseconds.", channelLabels, nil)
)

// Collector returns a Prometheus collector of the per-channel figures of
// n, read at each scrape; register it beside the job metrics
// (internal/metrics/promexport).
func (n *Node) Collector() prometheus.Collector { return nodeCollector{n} }

type nodeCollector struct{ n *Node }

// Describe describes nothing: the collector is unchecked, so that several
// nodes of one process (local mode, tests) can share a registry; their
// series differ by channel and direction.
func (c nodeCollector) Describe(chan<- *prometheus.Desc) {}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, info := range c.n.Channels() {
		l := []string{info.Name, info.Direction, info.Peer}
		s := info.Stats
		if info.Direction == "out" {
			ch <- prometheus.MustNewConstMetric(descBuffersOut, prometheus.CounterValue, float64(s.BuffersOut), l...)
			ch <- prometheus.MustNewConstMetric(descBytesOut, prometheus.CounterValue, float64(s.BytesOut), l...)
			ch <- prometheus.MustNewConstMetric(descBackPressured, prometheus.CounterValue, float64(s.BackPressured.Milliseconds()), l...)
		} else {
			ch <- prometheus.MustNewConstMetric(descBuffersIn, prometheus.CounterValue, float64(s.BuffersIn), l...)
			ch <- prometheus.MustNewConstMetric(descBytesIn, prometheus.CounterValue, float64(s.BytesIn), l...)
		}
		ch <- prometheus.MustNewConstMetric(descCredit, prometheus.GaugeValue, float64(s.Credit), l...)
		ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(s.Backlog), l...)
	}
}
