# convo: the commands a newcomer looks for.
#   make run       serve convo (embedded PostgreSQL unless DATABASE_URL is set)
#   make test      everything CI runs: setup, generated-code check, lint, all tests
#   make generate  regenerate sqlc and protobuf code (needs npm ci --prefix web)
#   make lint      gofmt, go vet, generated code is current
#   make bench     the benchmarks whose figures the docs quote
#   make bench-peer convo next to a push server in one shape (CONVO_PEER_RUN: its script)
#   make bench-chat many replies at once, one reader each (CONVO_PEER_CHAT_RUN: the peer's script)
#   make conformance the worker conformance suite (CONVO_CONFORMANCE_RUNTIMES: default go,typescript,python)
#   make python-sdk the Python worker runtime, convo-worker, as a wheel in dist/python (docs/workers-python.md)

.PHONY: run test generate lint bench bench-peer bench-chat conformance python-sdk

# The first build compiles every dependency (a few minutes on a small
# machine, silent after `go: downloading`): say so before it starts.
run:
	@echo "building bin/convo-api (the first build takes a few minutes; later ones, seconds)"
	go build -o bin/convo-api ./cmd/api
	exec bin/convo-api

test:
	./scripts/test.sh

generate:
	go tool sqlc generate
	scripts/sqlc-sum.sh write
	web/node_modules/.bin/buf generate

lint:
	./scripts/lint.sh

bench:
	go test -run '^$$' -bench 'AppendBlock|PromptClaim' -benchtime 2000x ./postgres/
	go test -run '^$$' -bench Search -benchtime 10x ./postgres/
	go test -run '^$$' -bench SwitchLongBranch -benchtime 20x ./postgres/
	go run ./cmd/bench

bench-peer:
	./scripts/bench-peer.sh

bench-chat:
	./scripts/bench-chat.sh

# Every scenario of conformance/scenarios against every selected runtime
# (conformance/README.md); the SDK runtimes need scripts/sdk-setup.sh's
# variables, or CONVO_CONFORMANCE_RUNTIMES=go.
conformance:
	go test -race -count=1 ./conformance/

# convo-worker (clients/python) built with no network, for pip install
# --no-index: docs/workers-python.md#installing.
python-sdk:
	@scripts/python-sdk.sh >/dev/null
