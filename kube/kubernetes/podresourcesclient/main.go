// Command podresources-client asks a node's pod resources API through the kubelet's own v1
// client (k8s.io/kubernetes/pkg/kubelet/apis/podresources.GetV1Client at KUBE_VERSION, the
// client the node e2e suite uses; GetV1alpha1Client for list-v1alpha1) and prints the answer
// as JSON (protojson, the .proto's field names), one line. A failed call prints the gRPC
// error on stderr and exits 1.
//
//	podresources-client --socket PATH list
//	podresources-client --socket PATH list-v1alpha1
//	podresources-client --socket PATH allocatable
//	podresources-client --socket PATH get NAMESPACE NAME
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	"k8s.io/kubernetes/pkg/kubelet/apis/podresources"
)

func call(ctx context.Context, cli v1.PodResourcesListerClient, args []string) (proto.Message, error) {
	switch {
	case len(args) == 1 && args[0] == "list":
		return cli.List(ctx, &v1.ListPodResourcesRequest{})
	case len(args) == 1 && args[0] == "allocatable":
		return cli.GetAllocatableResources(ctx, &v1.AllocatableResourcesRequest{})
	case len(args) == 3 && args[0] == "get":
		return cli.Get(ctx, &v1.GetPodResourcesRequest{PodNamespace: args[1], PodName: args[2]})
	}
	return nil, fmt.Errorf("usage: podresources-client --socket PATH list|list-v1alpha1|allocatable|get NAMESPACE NAME")
}

func askV1(ctx context.Context, endpoint string, args []string) (proto.Message, error) {
	cli, conn, err := podresources.GetV1Client(ctx, endpoint, 10*time.Second, 16*1024*1024)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return call(ctx, cli, args)
}

func listV1alpha1(ctx context.Context, endpoint string) (proto.Message, error) {
	cli, conn, err := podresources.GetV1alpha1Client(ctx, endpoint, 10*time.Second, 16*1024*1024)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return cli.List(ctx, &v1alpha1.ListPodResourcesRequest{})
}

func main() {
	socket := flag.String("socket", "", "the pod resources API's unix socket")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	endpoint := "unix://" + *socket
	var answer proto.Message
	var err error
	if len(flag.Args()) == 1 && flag.Arg(0) == "list-v1alpha1" {
		answer, err = listV1alpha1(ctx, endpoint)
	} else {
		answer, err = askV1(ctx, endpoint, flag.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	text, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(answer)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(text))
}
