module github.com/rlock-dev/rlock/clients/go/bench

go 1.22

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redsync/redsync/v4 v4.13.0
	github.com/redis/go-redis/v9 v9.7.3
	github.com/rlock-dev/rlock/clients/go/v4 v4.1.0
)

require (
	github.com/cespare/xxhash/v2 v2.2.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
)

replace github.com/rlock-dev/rlock/clients/go/v4 => ../
