package weir

import "github.com/weirstream/weir/internal/runtime"

// The keyed operators and the interfaces the task drives them through. None
// of them forwards its keyed state's checkpoint lifecycle: newKeyedEnv
// registers the keyed state with the operator instance's opEnv, addOperator
// puts it into the chain (runtime.Chained.Keyed), and the task delivers
// snapshot, complete and aborted to it (runtime.KeyedState). The operators'
// own SnapshotState and notifications are their functions' hooks and
// operator state only. Interval joins are keyed co-process operators, window
// joins and co-groups window operators.
var (
	_ runtime.KeyedState = (*keyedEnv[string])(nil)

	_ oneInputOp[int]            = (*keyedProcessOp[string, int, int])(nil)
	_ runtime.Snapshotter        = (*keyedProcessOp[string, int, int])(nil)
	_ runtime.CheckpointListener = (*keyedProcessOp[string, int, int])(nil)
	_ runtime.WatermarkHandler   = (*keyedProcessOp[string, int, int])(nil)
	_ runtime.WatermarkEmitter   = (*keyedProcessOp[string, int, int])(nil)
	_ twoInputOp[int, int]       = (*keyedCoProcessOp[string, int, int, int])(nil)
	_ runtime.Snapshotter        = (*keyedCoProcessOp[string, int, int, int])(nil)
	_ runtime.CheckpointListener = (*keyedCoProcessOp[string, int, int, int])(nil)
	_ runtime.WatermarkHandler   = (*keyedCoProcessOp[string, int, int, int])(nil)
	_ runtime.WatermarkEmitter   = (*keyedCoProcessOp[string, int, int, int])(nil)
	_ oneInputOp[int]            = (*windowOp[string, int, TimeWindow, int, int])(nil)
	_ runtime.Snapshotter        = (*windowOp[string, int, TimeWindow, int, int])(nil)
	_ runtime.CheckpointListener = (*windowOp[string, int, TimeWindow, int, int])(nil)
	_ runtime.WatermarkHandler   = (*windowOp[string, int, TimeWindow, int, int])(nil)
	_ runtime.WatermarkEmitter   = (*windowOp[string, int, TimeWindow, int, int])(nil)
	_ oneInputOp[int]            = (*slicedOp[string, int, int, int])(nil)
	_ runtime.Snapshotter        = (*slicedOp[string, int, int, int])(nil)
	_ runtime.WatermarkHandler   = (*slicedOp[string, int, int, int])(nil)
	_ runtime.WatermarkEmitter   = (*slicedOp[string, int, int, int])(nil)
	_ twoInputOp[int, int]       = (*keyedBroadcastProcessOp[string, int, int, int])(nil)
	_ runtime.Snapshotter        = (*keyedBroadcastProcessOp[string, int, int, int])(nil)
	_ runtime.CheckpointListener = (*keyedBroadcastProcessOp[string, int, int, int])(nil)
)
