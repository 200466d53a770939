// Command test-device-plugin serves one resource's devices with the kubelet's own device plugin
// stub (k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1 at KUBE_VERSION, the
// stub the node e2e suite's sample device plugin runs on), registered on the kubelet.sock of
// a directory given by flag, and changes its devices as the node e2e suite's testdeviceplugin
// (test/e2e_node/testdeviceplugin) does with UpdateDevices: each line read on stdin,
// `ID=Health[,ID=Health...]`, is the new device list, sent through ListAndWatch. Allocate
// answers one response per container with an env TEST_DEVICE_IDS naming its devices; with
// --exit-on-allocate the process exits inside Allocate instead (a plugin that crashes mid-call,
// its answer never sent). The
// registration, ListAndWatch and restart handling are upstream's; this file maps flags and
// stdin onto the stub.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
)

func parseDevices(text string) ([]*pluginapi.Device, error) {
	var devs []*pluginapi.Device
	for _, item := range strings.Split(strings.TrimSpace(text), ",") {
		if item == "" {
			continue
		}
		id, health, found := strings.Cut(item, "=")
		if !found || id == "" || health == "" {
			return nil, fmt.Errorf("not ID=Health: %q", item)
		}
		devs = append(devs, &pluginapi.Device{ID: id, Health: health})
	}
	return devs, nil
}

var exitOnAllocate = flag.Bool("exit-on-allocate", false, "exit (status 3) inside Allocate, answering nothing")

func allocate(r *pluginapi.AllocateRequest, _ map[string]*pluginapi.Device) (*pluginapi.AllocateResponse, error) {
	if *exitOnAllocate {
		klog.Infof("Exiting inside Allocate of %v", r.ContainerRequests)
		klog.Flush()
		os.Exit(3)
	}
	var response pluginapi.AllocateResponse
	for _, request := range r.ContainerRequests {
		response.ContainerResponses = append(response.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"TEST_DEVICE_IDS": strings.Join(request.DevicesIds, ",")},
		})
	}
	return &response, nil
}

func main() {
	klog.InitFlags(nil)
	dir := flag.String("plugin-dir", pluginapi.DevicePluginPath, "the device plugin directory: kubelet.sock is there, the plugin's socket is made there")
	socketName := flag.String("socket-name", "test-device-plugin.sock", "the plugin's socket name in --plugin-dir")
	resource := flag.String("resource", "", "the extended resource name to register")
	initial := flag.String("devices", "", "the first device list, ID=Health[,ID=Health...]")
	flag.Parse()
	ctx := context.Background()
	logger := klog.FromContext(ctx)
	if *resource == "" {
		klog.Fatal("--resource is required")
	}
	devs, err := parseDevices(*initial)
	if err != nil {
		klog.Fatalf("--devices: %v", err)
	}
	kubeletSocket := filepath.Join(*dir, filepath.Base(pluginapi.KubeletSocket))
	stub := plugin.NewDevicePluginStub(logger, devs, filepath.Join(*dir, *socketName), *resource, false, false)
	stub.SetAllocFunc(allocate)
	if err := stub.Start(ctx); err != nil {
		klog.Fatalf("start: %v", err)
	}
	// No DEPRECATION check (an empty directory argument): the agent's directory is the one given.
	if err := stub.Register(ctx, kubeletSocket, *resource, ""); err != nil {
		klog.Fatalf("register: %v", err)
	}
	go stub.Watch(ctx, kubeletSocket, *resource, "")
	go func() {
		lines := bufio.NewScanner(os.Stdin)
		for lines.Scan() {
			devs, err := parseDevices(lines.Text())
			if err != nil {
				logger.Error(err, "Ignored device list")
				continue
			}
			logger.Info("Updating devices", "devices", lines.Text())
			stub.Update(devs) // blocks until ListAndWatch sends it
		}
	}()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	sig := <-signals
	logger.Info("Shutting down", "signal", sig)
	if err := stub.Stop(logger); err != nil {
		klog.Fatalf("stop: %v", err)
	}
}
