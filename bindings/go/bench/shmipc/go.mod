module github.com/shmlink/shmlink/bindings/go/bench/shmipc

go 1.24

require (
	github.com/cloudwego/shmipc-go v0.2.0
	github.com/shmlink/shmlink/bindings/go v0.0.0
)

require (
	github.com/bytedance/gopkg v0.0.0-20220817015305-b879a72dc90f // indirect
	github.com/go-ole/go-ole v1.2.6 // indirect
	github.com/power-devops/perfstat v0.0.0-20210106213030-5aafc221ea8c // indirect
	github.com/shirou/gopsutil/v3 v3.22.1 // indirect
	github.com/yusufpapurcu/wmi v1.2.2 // indirect
	golang.org/x/sys v0.0.0-20220817070843-5a390386f1f2 // indirect
)

replace github.com/shmlink/shmlink/bindings/go => ../..
