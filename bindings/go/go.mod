module github.com/shmlink/shmlink/bindings/go

go 1.24
