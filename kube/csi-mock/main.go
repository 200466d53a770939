// Command csi-mock-driver serves the CSI mock driver of the Kubernetes e2e suite (package
// k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service, at KUBE_VERSION) on a unix
// socket, as a host process. The e2e suite runs that service inside e2e.test behind a proxy
// pod; csi-test, its former home, removed its own command in v4.3.0. This file only maps
// flags onto the service's Config and serves it: the driver's behaviour is upstream's.
package main

import (
	"flag"
	"net"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/driver"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

func main() {
	klog.InitFlags(nil)
	endpoint := flag.String("endpoint", "", "path of the unix socket to serve on (replaced if it exists)")
	var config service.Config
	flag.StringVar(&config.DriverName, "name", service.Name, "driver name; also the node ID it reports and accepts")
	flag.BoolVar(&config.DisableAttach, "disable-attach", false, "no PUBLISH_UNPUBLISH_VOLUME: ControllerPublish is Unimplemented")
	flag.Int64Var(&config.AttachLimit, "attach-limit", 0, "NodeGetInfo's max_volumes_per_node (0: none)")
	flag.BoolVar(&config.NodeExpansionRequired, "node-expand-required", false, "advertise EXPAND_VOLUME on the node")
	flag.BoolVar(&config.DisableControllerExpansion, "disable-controller-expansion", false, "no EXPAND_VOLUME on the controller")
	flag.BoolVar(&config.DisableOnlineExpansion, "disable-online-expansion", false, "plugin expansion OFFLINE instead of ONLINE")
	flag.BoolVar(&config.NodeVolumeConditionRequired, "node-volume-condition", false, "advertise GET_VOLUME_HEALTH on the node")
	flag.BoolVar(&config.VolumeMountGroupRequired, "volume-mount-group", false, "advertise VOLUME_MOUNT_GROUP on the node")
	flag.BoolVar(&config.EnableTopology, "enable-topology", false, "advertise VOLUME_ACCESSIBILITY_CONSTRAINTS")
	flag.Parse()
	if *endpoint == "" {
		klog.Fatal("--endpoint is required")
	}
	if err := os.Remove(*endpoint); err != nil && !os.IsNotExist(err) {
		klog.Fatalf("remove stale %s: %v", *endpoint, err)
	}
	listener, err := net.Listen("unix", *endpoint)
	if err != nil {
		klog.Fatalf("listen on %s: %v", *endpoint, err)
	}
	mock := service.New(config)
	server := driver.NewCSIDriver(&driver.CSIDriverServers{Controller: mock, Identity: mock, Node: mock})
	// A nil interceptor: the driver's own, which logs each call as "gRPCCall: {json}" at -v=3.
	if err := server.Start(listener, nil); err != nil {
		klog.Fatalf("serve on %s: %v", *endpoint, err)
	}
	klog.InfoS("serving", "driver", config.DriverName, "endpoint", *endpoint)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	server.Stop()
	_ = os.Remove(*endpoint)
}
