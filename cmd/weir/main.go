// Command weir runs weir's bundled jobs and talks to a running JobManager's
// REST API.
//
//	weir demo
//	weir run wordcount [--input PATH] [--output DIR] [--parallelism N] [--checkpoint-interval D --checkpoint-dir DIR] [--savepoint-dir DIR] [--restore latest|PATH] [--config weir.yaml]
//	weir run nexmark --query qN (--events N | --input FILE) [--output DIR] [...]
//	weir run NAME --jobmanager HOST:PORT [--detached] [--cluster-token T] [--tls-cert F --tls-key F --tls-ca F] [the job's flags]
//	weir jobmanager | taskmanager | cluster start|stop
//	weir nexmark gen --events N --output FILE
//	weir list | info | cancel | checkpoint | savepoint | stop | checkpoints [--jobmanager URL]
package main

import "github.com/weirstream/weir/cli"

func main() { cli.Main(cli.Bundled()...) }
