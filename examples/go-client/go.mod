module punto-banco/examples/go-client

go 1.19
