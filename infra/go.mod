module github.com/nodetide/nodetide/infra

go 1.26
