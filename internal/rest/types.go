package rest

// The JSON bodies of the API. Names, units and shapes follow Flink's REST
// API (v1): times are milliseconds since the Unix epoch, durations are
// milliseconds, sizes are bytes, and -1 marks a time not reached yet.
// Fields Flink does not have are marked "weir:".

// ErrorResponse is the body of every error: {"errors": ["..."]}.
type ErrorResponse struct {
	Errors []string `json:"errors"`
}

// ClusterOverview is GET /overview.
type ClusterOverview struct {
	TaskManagers   int    `json:"taskmanagers"`
	SlotsTotal     int    `json:"slots-total"`
	SlotsAvailable int    `json:"slots-available"`
	JobsRunning    int    `json:"jobs-running"`
	JobsFinished   int    `json:"jobs-finished"`
	JobsCancelled  int    `json:"jobs-cancelled"`
	JobsFailed     int    `json:"jobs-failed"`
	Version        string `json:"weir-version"`  // Flink: flink-version
	Commit         string `json:"weir-revision"` // Flink: flink-commit
	// HighAvailability names the leader and the standbys of a JobManager
	// with high availability (HighAvailability); omitted without.
	HighAvailability *HighAvailabilityInfo `json:"high-availability,omitempty"`
}

// HighAvailability is implemented by a JobManager that runs with standbys
// (internal/ha): GET /overview then names the leader and the standbys.
type HighAvailability interface {
	HighAvailability() HighAvailabilityInfo
}

// HighAvailabilityInfo is the "high-availability" part of GET /overview.
type HighAvailabilityInfo struct {
	Type      string `json:"type"` // "etcd"
	ClusterID string `json:"cluster-id"`
	// LeaderRevision is the leadership's revision, the control plane's
	// fencing token.
	LeaderRevision int64            `json:"leader-revision"`
	Leader         JobManagerInfo   `json:"leader"`
	Standbys       []JobManagerInfo `json:"standbys"`
	// Writes, FencedWrites and FailedWrites count the leader's writes to
	// etcd: done, refused by the leadership guard, not answered.
	Writes       int64 `json:"writes"`
	FencedWrites int64 `json:"fenced-writes"`
	FailedWrites int64 `json:"failed-writes"`
}

// JobManagerInfo is one JobManager of HighAvailabilityInfo.
type JobManagerInfo struct {
	Name       string `json:"name"`
	RPCAddress string `json:"rpc-address"`
	RESTURL    string `json:"rest-url,omitempty"`
	// Since is when it was elected (the leader) or started (a standby),
	// ms since the epoch.
	Since int64 `json:"since"`
}

// DashboardConfiguration is GET /config.
type DashboardConfiguration struct {
	RefreshInterval int64    `json:"refresh-interval"`
	TimezoneName    string   `json:"timezone-name"`
	TimezoneOffset  int64    `json:"timezone-offset"`
	Version         string   `json:"weir-version"`  // Flink: flink-version
	Revision        string   `json:"weir-revision"` // Flink: flink-revision
	Features        Features `json:"features"`
}

// Features are the dashboard's optional features.
type Features struct {
	WebSubmit  bool `json:"web-submit"`
	WebCancel  bool `json:"web-cancel"`
	WebHistory bool `json:"web-history"`
}

// JobIDsWithStatus is GET /jobs.
type JobIDsWithStatus struct {
	Jobs []JobIDWithStatus `json:"jobs"`
}

// JobIDWithStatus is one job of GET /jobs.
type JobIDWithStatus struct {
	ID     string    `json:"id"`
	Status JobStatus `json:"status"`
}

// MultipleJobsDetails is GET /jobs/overview.
type MultipleJobsDetails struct {
	Jobs []JobOverview `json:"jobs"`
}

// JobOverview is one job of GET /jobs/overview.
type JobOverview struct {
	JID              string     `json:"jid"`
	Name             string     `json:"name"`
	State            JobStatus  `json:"state"`
	StartTime        int64      `json:"start-time"`
	EndTime          int64      `json:"end-time"`
	Duration         int64      `json:"duration"`
	LastModification int64      `json:"last-modification"`
	Tasks            TaskCounts `json:"tasks"`
}

// TaskCounts counts a job's subtasks by status.
type TaskCounts struct {
	Total        int `json:"total"`
	Created      int `json:"created"`
	Scheduled    int `json:"scheduled"`
	Deploying    int `json:"deploying"`
	Running      int `json:"running"`
	Finished     int `json:"finished"`
	Canceling    int `json:"canceling"`
	Canceled     int `json:"canceled"`
	Failed       int `json:"failed"`
	Reconciling  int `json:"reconciling"`
	Initializing int `json:"initializing"`
}

// JobDetailsInfo is GET /jobs/{id}.
type JobDetailsInfo struct {
	JID            string    `json:"jid"`
	Name           string    `json:"name"`
	IsStoppable    bool      `json:"isStoppable"`
	State          JobStatus `json:"state"`
	StartTime      int64     `json:"start-time"`
	EndTime        int64     `json:"end-time"`
	Duration       int64     `json:"duration"`
	MaxParallelism int       `json:"maxParallelism"`
	Now            int64     `json:"now"`
	// Timestamps maps job statuses to when the job entered them (known
	// ones only).
	Timestamps   map[JobStatus]int64 `json:"timestamps"`
	Vertices     []JobVertexDetails  `json:"vertices"`
	StatusCounts map[TaskStatus]int  `json:"status-counts"`
	Plan         JobPlan             `json:"plan"`
	// Checkpoints are the job's checkpoint counts (weir: Flink needs a
	// second request).
	Checkpoints CheckpointCountsBrief `json:"checkpoints"`
	// NumRestarts counts the job's restarts after failures (Flink's
	// numRestarts metric).
	NumRestarts int64 `json:"numRestarts"`
}

// CheckpointCountsBrief is a job's checkpoint counts in GET /jobs/{id}.
type CheckpointCountsBrief struct {
	Completed       int64 `json:"completed"`
	Failed          int64 `json:"failed"`
	InProgress      int   `json:"in_progress"`
	LatestCompleted int64 `json:"latest_completed"`
}

// JobVertexDetails is one vertex in GET /jobs/{id}.
type JobVertexDetails struct {
	ID             string             `json:"id"`
	Name           string             `json:"name"`
	MaxParallelism int                `json:"maxParallelism"`
	Parallelism    int                `json:"parallelism"`
	Status         TaskStatus         `json:"status"`
	StartTime      int64              `json:"start-time"`
	EndTime        int64              `json:"end-time"`
	Duration       int64              `json:"duration"`
	Tasks          map[TaskStatus]int `json:"tasks"`
	Metrics        IOMetricsInfo      `json:"metrics"`
	// BackPressure is the vertex's backpressure (weir: Flink serves it at
	// /jobs/{id}/vertices/{vid}/backpressure).
	BackPressure JobVertexBackPressure `json:"backpressure"`
	// Operators are the chain's operators, head first, with their records
	// in and out summed over the subtasks (weir: Flink serves these as the
	// operator-scope metrics numRecordsIn/numRecordsOut of
	// /jobs/{id}/vertices/{vid}/metrics). The vertex's read-records are
	// the head's records in, its write-records the records the tail sent
	// to other tasks.
	Operators []JobVertexOperator `json:"operators,omitempty"`
}

// JobVertexDetailsInfo is GET /jobs/{id}/vertices/{vid}: a vertex and its
// subtasks, with where each runs (Flink's JobVertexDetailsInfo).
type JobVertexDetailsInfo struct {
	ID             string                               `json:"id"`
	Name           string                               `json:"name"`
	Parallelism    int                                  `json:"parallelism"`
	MaxParallelism int                                  `json:"maxParallelism"`
	Now            int64                                `json:"now"`
	Subtasks       []SubtaskExecutionAttemptDetailsInfo `json:"subtasks"`
}

// SubtaskExecutionAttemptDetailsInfo is one subtask of a vertex, as Flink's
// of the same name: Host is the TaskManager's host (Flink before 1.17),
// Endpoint its host:port, "(unassigned)" both while the subtask is not
// placed.
type SubtaskExecutionAttemptDetailsInfo struct {
	Subtask       int           `json:"subtask"`
	Status        TaskStatus    `json:"status"`
	Attempt       int           `json:"attempt"`
	Endpoint      string        `json:"endpoint"`
	Host          string        `json:"host"`
	StartTime     int64         `json:"start-time"`
	EndTime       int64         `json:"end-time"`
	Duration      int64         `json:"duration"`
	Metrics       IOMetricsInfo `json:"metrics"`
	TaskManagerID string        `json:"taskmanager-id"`
}

// JobVertexTaskManagersInfo is GET /jobs/{id}/vertices/{vid}/taskmanagers:
// a vertex's subtasks grouped by the TaskManager they run on (Flink's
// JobVertexTaskManagersInfo), in the order of their first subtask.
type JobVertexTaskManagersInfo struct {
	ID           string                  `json:"id"`
	Name         string                  `json:"name"`
	Now          int64                   `json:"now"`
	TaskManagers []JobVertexTaskManagers `json:"taskmanagers"`
}

// JobVertexTaskManagers is one TaskManager of a vertex: the status of its
// subtasks there (the least advanced, as a vertex's), their counts by
// status, their figures summed, their earliest start and latest end.
type JobVertexTaskManagers struct {
	Endpoint      string             `json:"endpoint"`
	Host          string             `json:"host"`
	Status        TaskStatus         `json:"status"`
	StartTime     int64              `json:"start-time"`
	EndTime       int64              `json:"end-time"`
	Duration      int64              `json:"duration"`
	Metrics       IOMetricsInfo      `json:"metrics"`
	StatusCounts  map[TaskStatus]int `json:"status-counts"`
	TaskManagerID string             `json:"taskmanager-id"`
	// Subtasks are the indexes of the vertex's subtasks on this
	// TaskManager (weir).
	Subtasks []int `json:"subtasks"`
}

// JobVertexOperator is one chained operator in GET /jobs/{id}.
type JobVertexOperator struct {
	Name         string `json:"name"`
	ReadRecords  int64  `json:"read-records"`
	WriteRecords int64  `json:"write-records"`
}

// IOMetricsInfo are a vertex's counters.
type IOMetricsInfo struct {
	// ReadBytes and WriteBytes count the bytes of serialized exchanges
	// between tasks only (Flink's numBytesIn/numBytesOut). The local
	// runtime has none, its channels carry Go values: they are 0 and
	// ReadBytesComplete and WriteBytesComplete are false. On a cluster
	// they are the payload bytes of the channels to and from subtasks on
	// other TaskManagers; a channel between subtasks of one TaskManager
	// carries Go values and counts none (Flink serializes local channels
	// too and counts them).
	ReadBytes                    int64 `json:"read-bytes"`
	ReadBytesComplete            bool  `json:"read-bytes-complete"`
	WriteBytes                   int64 `json:"write-bytes"`
	WriteBytesComplete           bool  `json:"write-bytes-complete"`
	ReadRecords                  int64 `json:"read-records"`
	ReadRecordsComplete          bool  `json:"read-records-complete"`
	WriteRecords                 int64 `json:"write-records"`
	WriteRecordsComplete         bool  `json:"write-records-complete"`
	AccumulatedBackpressuredTime int64 `json:"accumulated-backpressured-time"`
	AccumulatedIdleTime          int64 `json:"accumulated-idle-time"`
	AccumulatedBusyTime          int64 `json:"accumulated-busy-time"`
}

// JobVertexBackPressure is a vertex's backpressure level: "ok" up to 10%
// of the time backpressured, "low" up to 50%, "high" above (as Flink).
type JobVertexBackPressure struct {
	Level string  `json:"backpressure-level"`
	Ratio float64 `json:"ratio"`
}

// JobPlan is the job's dataflow in GET /jobs/{id}.
type JobPlan struct {
	JID   string        `json:"jid"`
	Name  string        `json:"name"`
	Type  string        `json:"type"`
	Nodes []JobPlanNode `json:"nodes"`
}

// JobPlanNode is a vertex in the plan.
type JobPlanNode struct {
	ID          string         `json:"id"`
	Parallelism int            `json:"parallelism"`
	Operator    string         `json:"operator"`
	Description string         `json:"description"`
	Inputs      []JobPlanInput `json:"inputs,omitempty"`
}

// JobPlanInput is an edge into a plan node.
type JobPlanInput struct {
	Num          int    `json:"num"`
	ID           string `json:"id"`
	ShipStrategy string `json:"ship_strategy"`
	Exchange     string `json:"exchange"`
}

// JobExceptionsInfo is GET /jobs/{id}/exceptions.
type JobExceptionsInfo struct {
	RootException *string                  `json:"root-exception"`
	Timestamp     *int64                   `json:"timestamp"`
	AllExceptions []ExecutionExceptionInfo `json:"all-exceptions"`
	Truncated     bool                     `json:"truncated"`
	History       JobExceptionHistory      `json:"exceptionHistory"`
}

// ExecutionExceptionInfo is an entry of the deprecated all-exceptions list.
type ExecutionExceptionInfo struct {
	Exception string `json:"exception"`
	Task      string `json:"task"`
	Location  string `json:"location"`
	Timestamp int64  `json:"timestamp"`
}

// JobExceptionHistory lists a job's failures, newest first.
type JobExceptionHistory struct {
	Entries   []RootExceptionInfo `json:"entries"`
	Truncated bool                `json:"truncated"`
}

// RootExceptionInfo is one failure.
type RootExceptionInfo struct {
	ExceptionName        string              `json:"exceptionName"`
	Stacktrace           string              `json:"stacktrace"`
	Timestamp            int64               `json:"timestamp"`
	TaskName             *string             `json:"taskName"`
	Location             *string             `json:"location"`
	ConcurrentExceptions []RootExceptionInfo `json:"concurrentExceptions"`
}

// TaskManagersInfo is GET /taskmanagers.
type TaskManagersInfo struct {
	TaskManagers []TaskManagerEntry `json:"taskmanagers"`
}

// TaskManagerEntry is one TaskManager.
type TaskManagerEntry struct {
	ID          string              `json:"id"`
	Path        string              `json:"path"`
	DataPort    int                 `json:"dataPort"`
	JMXPort     int                 `json:"jmxPort"`
	LastBeat    int64               `json:"timeSinceLastHeartbeat"` // a timestamp despite its name, as in Flink
	SlotsNumber int                 `json:"slotsNumber"`
	FreeSlots   int                 `json:"freeSlots"`
	Hardware    HardwareDescription `json:"hardware"`
}

// HardwareDescription is a TaskManager's machine.
type HardwareDescription struct {
	CPUCores       int   `json:"cpuCores"`
	PhysicalMemory int64 `json:"physicalMemory"`
	FreeMemory     int64 `json:"freeMemory"`
	ManagedMemory  int64 `json:"managedMemory"`
}

// --- checkpoints -------------------------------------------------------------

// CheckpointingStatistics is GET /jobs/{id}/checkpoints.
type CheckpointingStatistics struct {
	Counts  CheckpointCounts       `json:"counts"`
	Summary CheckpointSummaryStats `json:"summary"`
	Latest  LatestCheckpoints      `json:"latest"`
	// History holds the most recent checkpoints, newest first.
	History []CheckpointStatistics `json:"history"`
}

// CheckpointCounts counts a job's checkpoints.
type CheckpointCounts struct {
	Restored   int64 `json:"restored"`
	Total      int64 `json:"total"`
	InProgress int   `json:"in_progress"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
}

// CheckpointSummaryStats summarises the completed checkpoints of the
// history.
type CheckpointSummaryStats struct {
	CheckpointedSize  StatsSummary `json:"checkpointed_size"`
	StateSize         StatsSummary `json:"state_size"`
	EndToEndDuration  StatsSummary `json:"end_to_end_duration"`
	AlignmentBuffered StatsSummary `json:"alignment_buffered"`
	ProcessedData     StatsSummary `json:"processed_data"`
	PersistedData     StatsSummary `json:"persisted_data"`
}

// StatsSummary are the minimum, maximum, average and percentiles of a
// figure (all 0 when there is nothing to summarise).
type StatsSummary struct {
	Min  int64   `json:"min"`
	Max  int64   `json:"max"`
	Avg  int64   `json:"avg"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
}

// LatestCheckpoints are the latest completed checkpoint, savepoint and
// failed checkpoint, and the latest restore; null when there is none.
type LatestCheckpoints struct {
	Completed *CheckpointStatistics         `json:"completed"`
	Savepoint *CheckpointStatistics         `json:"savepoint"`
	Failed    *CheckpointStatistics         `json:"failed"`
	Restored  *RestoredCheckpointStatistics `json:"restored"`
}

// RestoredCheckpointStatistics describes the latest restore.
type RestoredCheckpointStatistics struct {
	ID               int64  `json:"id"`
	RestoreTimestamp int64  `json:"restore_timestamp"`
	IsSavepoint      bool   `json:"is_savepoint"`
	ExternalPath     string `json:"external_path"`
}

// Values of CheckpointStatistics.ClassName and Status.
const (
	classCompleted  = "completed"
	classInProgress = "in_progress"
	classFailed     = "failed"
)

// CheckpointStatistics describes one checkpoint or savepoint: an entry of
// the history, a latest one, or GET /jobs/{id}/checkpoints/details/{cid}
// (only there with Tasks filled).
type CheckpointStatistics struct {
	// ClassName is "completed", "in_progress" or "failed".
	ClassName   string `json:"className"`
	ID          int64  `json:"id"`
	Status      string `json:"status"`
	IsSavepoint bool   `json:"is_savepoint"`
	// IsUnaligned: some task snapshotted unaligned; CheckpointType is then
	// "UNALIGNED_CHECKPOINT" (Flink's values: CHECKPOINT,
	// UNALIGNED_CHECKPOINT, SAVEPOINT).
	IsUnaligned             bool   `json:"is_unaligned"`
	CheckpointType          string `json:"checkpoint_type"`
	TriggerTimestamp        int64  `json:"trigger_timestamp"`
	LatestAckTimestamp      int64  `json:"latest_ack_timestamp"`
	CheckpointedSize        int64  `json:"checkpointed_size"`
	StateSize               int64  `json:"state_size"`
	EndToEndDuration        int64  `json:"end_to_end_duration"`
	AlignmentBuffered       int64  `json:"alignment_buffered"`
	ProcessedData           int64  `json:"processed_data"`
	PersistedData           int64  `json:"persisted_data"`
	NumSubtasks             int    `json:"num_subtasks"`
	NumAcknowledgedSubtasks int    `json:"num_acknowledged_subtasks"`
	// Tasks are per vertex, by vertex id.
	Tasks map[string]TaskCheckpointStatistics `json:"tasks"`

	// Completed checkpoints only.
	ExternalPath *string `json:"external_path,omitempty"`
	Discarded    *bool   `json:"discarded,omitempty"`
	// Failed checkpoints only.
	FailureTimestamp *int64  `json:"failure_timestamp,omitempty"`
	FailureMessage   *string `json:"failure_message,omitempty"`
}

// TaskCheckpointStatistics are one vertex's figures for a checkpoint.
type TaskCheckpointStatistics struct {
	ID                      int64  `json:"id"`
	Status                  string `json:"status"`
	LatestAckTimestamp      int64  `json:"latest_ack_timestamp"`
	CheckpointedSize        int64  `json:"checkpointed_size"`
	StateSize               int64  `json:"state_size"`
	EndToEndDuration        int64  `json:"end_to_end_duration"`
	AlignmentBuffered       int64  `json:"alignment_buffered"`
	ProcessedData           int64  `json:"processed_data"`
	PersistedData           int64  `json:"persisted_data"`
	NumSubtasks             int    `json:"num_subtasks"`
	NumAcknowledgedSubtasks int    `json:"num_acknowledged_subtasks"`
}

// TaskCheckpointStatisticsWithSubtaskDetails is
// GET /jobs/{id}/checkpoints/details/{cid}/subtasks/{vertex}.
type TaskCheckpointStatisticsWithSubtaskDetails struct {
	TaskCheckpointStatistics
	Summary  TaskCheckpointSummary         `json:"summary"`
	Subtasks []SubtaskCheckpointStatistics `json:"subtasks"`
}

// TaskCheckpointSummary summarises the acknowledged subtasks of a vertex.
type TaskCheckpointSummary struct {
	CheckpointedSize   StatsSummary              `json:"checkpointed_size"`
	StateSize          StatsSummary              `json:"state_size"`
	EndToEndDuration   StatsSummary              `json:"end_to_end_duration"`
	CheckpointDuration CheckpointDurationSummary `json:"checkpoint_duration"`
	Alignment          AlignmentSummary          `json:"alignment"`
	StartDelay         StatsSummary              `json:"start_delay"`
}

// CheckpointDurationSummary summarises the synchronous and asynchronous
// parts of subtask snapshots.
type CheckpointDurationSummary struct {
	Sync  StatsSummary `json:"sync"`
	Async StatsSummary `json:"async"`
}

// AlignmentSummary summarises barrier alignment.
type AlignmentSummary struct {
	Buffered  StatsSummary `json:"buffered"`
	Processed StatsSummary `json:"processed"`
	Persisted StatsSummary `json:"persisted"`
	Duration  StatsSummary `json:"duration"`
}

// Values of SubtaskCheckpointStatistics.Status.
const (
	subtaskCompleted = "completed"
	subtaskPending   = "pending_or_failed"
)

// SubtaskCheckpointStatistics is one subtask's part of a checkpoint:
// status "completed" with the figures, or "pending_or_failed" without.
type SubtaskCheckpointStatistics struct {
	Index  int    `json:"index"`
	Status string `json:"status"`
	*CompletedSubtaskCheckpoint
}

// CompletedSubtaskCheckpoint are an acknowledged subtask's figures.
type CompletedSubtaskCheckpoint struct {
	AckTimestamp        int64                  `json:"ack_timestamp"`
	EndToEndDuration    int64                  `json:"end_to_end_duration"`
	StateSize           int64                  `json:"state_size"`
	CheckpointedSize    int64                  `json:"checkpointed_size"`
	Checkpoint          SubtaskCheckpointTimes `json:"checkpoint"`
	Alignment           SubtaskAlignment       `json:"alignment"`
	StartDelay          int64                  `json:"start_delay"`
	UnalignedCheckpoint bool                   `json:"unaligned_checkpoint"`
	Aborted             bool                   `json:"aborted"`
}

// SubtaskCheckpointTimes are the durations of a subtask's snapshot parts.
type SubtaskCheckpointTimes struct {
	Sync  int64 `json:"sync"`
	Async int64 `json:"async"`
}

// SubtaskAlignment is a subtask's barrier alignment.
type SubtaskAlignment struct {
	Buffered  int64 `json:"buffered"`
	Processed int64 `json:"processed"`
	Persisted int64 `json:"persisted"`
	Duration  int64 `json:"duration"`
}

// CheckpointConfig is GET /jobs/{id}/checkpoints/config.
type CheckpointConfig struct {
	Mode                       string                     `json:"mode"` // "exactly_once" or "at_least_once"
	Interval                   int64                      `json:"interval"`
	Timeout                    int64                      `json:"timeout"`
	MinPause                   int64                      `json:"min_pause"`
	MaxConcurrent              int                        `json:"max_concurrent"`
	Externalization            ExternalizedCheckpointInfo `json:"externalization"`
	StateBackend               string                     `json:"state_backend"`
	CheckpointStorage          string                     `json:"checkpoint_storage"`
	UnalignedCheckpoints       bool                       `json:"unaligned_checkpoints"`
	TolerableFailedCheckpoints int                        `json:"tolerable_failed_checkpoints"`
	AlignedCheckpointTimeout   int64                      `json:"aligned_checkpoint_timeout"`
	CheckpointsAfterTasksEnd   bool                       `json:"checkpoints_after_tasks_finish"`
	RetainedCheckpoints        int                        `json:"retained_checkpoints"` // weir
	SavepointDir               string                     `json:"savepoint_dir"`        // weir
	EveryNRecords              int64                      `json:"every_n_records"`      // weir
}

// ExternalizedCheckpointInfo says whether checkpoints outlive the job.
type ExternalizedCheckpointInfo struct {
	Enabled              bool `json:"enabled"`
	DeleteOnCancellation bool `json:"delete_on_cancellation"`
}

// --- asynchronous operations -------------------------------------------------

// CheckpointTriggerRequest is the optional body of
// POST /jobs/{id}/checkpoints.
type CheckpointTriggerRequest struct {
	// CheckpointType is "CONFIGURED" (the default; the only one weir
	// supports).
	CheckpointType string `json:"checkpointType,omitempty"`
	// TriggerID makes the request idempotent: a retry with the same id
	// starts nothing new. Optional; 32 hex digits.
	TriggerID string `json:"triggerId,omitempty"`
}

// SavepointTriggerRequest is the optional body of POST /jobs/{id}/savepoints.
type SavepointTriggerRequest struct {
	TargetDirectory string `json:"target-directory,omitempty"`
	// CancelJob stops the job after the savepoint (as POST /stop).
	CancelJob  bool   `json:"cancel-job,omitempty"`
	TriggerID  string `json:"triggerId,omitempty"`
	FormatType string `json:"formatType,omitempty"` // "CANONICAL" (the default; the only one)
}

// StopWithSavepointRequest is the optional body of POST /jobs/{id}/stop.
type StopWithSavepointRequest struct {
	TargetDirectory string `json:"targetDirectory,omitempty"`
	Drain           bool   `json:"drain,omitempty"`
	TriggerID       string `json:"triggerId,omitempty"`
	FormatType      string `json:"formatType,omitempty"`
}

// TriggerResponse is the 202 answer to an asynchronous operation: poll its
// status with the request id.
type TriggerResponse struct {
	RequestID string `json:"request-id"`
}

// Values of QueueStatus.ID.
const (
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
)

// AsynchronousOperationResult is the status of a checkpoint, savepoint or
// stop request. Operation is set once the status is COMPLETED: with the
// result, or with FailureCause when the operation failed.
type AsynchronousOperationResult struct {
	Status    QueueStatus    `json:"status"`
	Operation *OperationInfo `json:"operation,omitempty"`
}

// QueueStatus is IN_PROGRESS or COMPLETED.
type QueueStatus struct {
	ID string `json:"id"`
}

// OperationInfo is an operation's outcome: CheckpointID for checkpoints,
// Location for savepoints and stops, FailureCause when it failed.
type OperationInfo struct {
	CheckpointID *int64        `json:"checkpointId,omitempty"`
	Location     *string       `json:"location,omitempty"`
	FailureCause *FailureCause `json:"failure-cause,omitempty"`
}

// FailureCause describes why an operation failed.
type FailureCause struct {
	// Class is the error's Go type, in the place of Flink's exception class.
	Class string `json:"class"`
	// StackTrace is the error's text.
	StackTrace string `json:"stack-trace"`
}

// Metric is one metric of a collection, as Flink's REST API answers
// metric queries (MetricCollectionResponseBody): its id and its value as
// a string.
type Metric struct {
	ID    string `json:"id"`
	Value string `json:"value"`
}
