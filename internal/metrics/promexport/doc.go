// Package promexport exposes the figures of weir jobs to Prometheus, with
// Flink's metric names under the weir_ prefix, so that dashboards and alerts
// written for Flink's Prometheus reporter translate by a prefix:
//
//	weir_jobmanager_job_lastCheckpointDuration        ms, the latest completed checkpoint
//	weir_jobmanager_job_lastCheckpointSize            bytes written by it (checkpointed size)
//	weir_jobmanager_job_lastCheckpointFullSize        bytes of the full state
//	weir_jobmanager_job_lastCompletedCheckpointId
//	weir_jobmanager_job_lastCheckpointRestoreTimestamp ms since the epoch; -1 when never restored
//	weir_jobmanager_job_numberOfCompletedCheckpoints
//	weir_jobmanager_job_numberOfFailedCheckpoints
//	weir_jobmanager_job_numberOfInProgressCheckpoints
//	weir_jobmanager_job_totalNumberOfCheckpoints
//	weir_jobmanager_job_numRestarts
//	weir_jobmanager_job_uptime                        ms while running, else 0
//	    labels: job_id, job_name
//
//	weir_taskmanager_job_task_numRecordsIn            counter
//	weir_taskmanager_job_task_numRecordsOut           counter
//	weir_taskmanager_job_task_numBytesIn              counter: payload bytes from other TaskManagers
//	weir_taskmanager_job_task_numBytesOut             counter: payload bytes to other TaskManagers
//	weir_taskmanager_job_task_backPressuredTimeMsPerSecond
//	weir_taskmanager_job_task_idleTimeMsPerSecond
//	weir_taskmanager_job_task_busyTimeMsPerSecond
//	weir_taskmanager_job_task_accumulatedBackPressuredTimeMs
//	weir_taskmanager_job_task_accumulatedIdleTimeMs
//	weir_taskmanager_job_task_accumulatedBusyTimeMs
//	weir_taskmanager_job_task_currentInputWatermark   ms; absent before the first watermark
//	weir_taskmanager_job_task_currentOutputWatermark
//	weir_taskmanager_job_task_watermarkLag            ms, now - currentInputWatermark
//	weir_taskmanager_job_task_checkpointedStateSize   bytes of the subtask's state in the latest completed checkpoint
//	    labels: job_id, job_name, task_id (the vertex id), task_name,
//	            subtask_index, task_attempt_num, tm_id ("local" in local
//	            mode, the TaskManager's resource id on a cluster)
//
//	weir_taskmanager_job_task_operator_numRecordsIn   every operator of the chain
//	weir_taskmanager_job_task_operator_numRecordsOut  every operator of the chain
//	weir_taskmanager_job_task_operator_currentInputWatermark  (head)
//	weir_taskmanager_job_task_operator_currentOutputWatermark (tail)
//	    labels: the task's, operator_id ("<vertex id>.<index in the
//	            chain>", unique in the job) and operator_name
//
// Records are counted per operator of a chain, as Flink's operator-scope
// numRecordsIn/numRecordsOut (see package metrics for how, at the cost of
// one plain increment per record and operator). Watermarks are the task's,
// reported for the chain's head and tail. Bytes are those of a task's
// network channels to and from other processes of a cluster: records
// between tasks of one process travel as Go values and count none (local
// mode's tasks, and those a cluster puts on the same TaskManager, where
// Flink serializes local channels too and counts their bytes).
//
// As in Flink, each process exports what it runs. Local mode's registry
// (New) exports both families of its jobs. On a cluster the JobManager's
// exports the job family (its jobs hold no tasks), and each TaskManager's
// /metrics (its --metrics-address) the task and operator families of the
// subtasks running there: its jobs are TaskManagerJobs, with tm_id its
// resource id, and its registry takes the exporter's Collector beside its
// own collectors. checkpointedStateSize is the JobManager's to know and is
// exported by no TaskManager.
//
// Nothing is counted twice: a Registry holds a collector that reads
// metrics.Job and the checkpoint statistics at each scrape, in a private
// prometheus.Registry (never the global one), with the Go runtime and
// process collectors beside it.
package promexport
