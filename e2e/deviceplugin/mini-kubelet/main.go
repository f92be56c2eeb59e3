// Command mini-kubelet is the kubelet's side of the device-plugin API (k8s.io/kubelet deviceplugin v1beta1), and
// nothing else: it serves Registration on the kubelet socket, and when a plugin registers it does what the
// kubelet's device manager does next: dials the plugin's endpoint beside the socket, asks its options, reads the
// first ListAndWatch answer (the devices the node would advertise as capacity), and asks it to Allocate one
// device, as for a container that requests one, and two devices where there are two (a pod asking for two
// slots). It writes all of it as JSON and exits; it never schedules or starts anything.
//
// Usage: mini-kubelet [--socket /var/lib/kubelet/device-plugins/kubelet.sock] [--timeout 60s] [--out FILE]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Every message of the API is written as its protobuf JSON (protojson: lowerCamelCase field names).
type allocation struct {
	Request  []string        `json:"request"`
	Response json.RawMessage `json:"response"`
	Error    *string         `json:"error"`
}

type report struct {
	Register    json.RawMessage   `json:"register"`
	Options     json.RawMessage   `json:"options"`
	Devices     []json.RawMessage `json:"devices"`
	DeviceCount int               `json:"deviceCount"`
	Allocate    []allocation      `json:"allocate"`
}

func protoJSON(m proto.Message) json.RawMessage {
	data, err := protojson.Marshal(m)
	if err != nil {
		panic(err)
	}
	return data
}

type registration struct {
	pluginapi.UnimplementedRegistrationServer
	requests chan *pluginapi.RegisterRequest
}

func (r *registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("unsupported device-plugin API version %q (this kubelet speaks %s)", req.Version, pluginapi.Version)
	}
	select {
	case r.requests <- req:
	default:
		return nil, errors.New("already registered a plugin")
	}
	return &pluginapi.Empty{}, nil
}

func allocate(ctx context.Context, client pluginapi.DevicePluginClient, ids []string) allocation {
	a := allocation{Request: ids, Response: json.RawMessage("null")}
	req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}}
	resp, err := client.Allocate(ctx, req)
	if err != nil {
		text := err.Error()
		a.Error = &text
		return a
	}
	if len(resp.ContainerResponses) != 1 {
		text := fmt.Sprintf("%d container responses for one container request", len(resp.ContainerResponses))
		a.Error = &text
		return a
	}
	a.Response = protoJSON(resp.ContainerResponses[0])
	return a
}

func run(socket string, timeout time.Duration) (*report, error) {
	_ = os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	server := grpc.NewServer()
	reg := &registration{requests: make(chan *pluginapi.RegisterRequest, 1)}
	pluginapi.RegisterRegistrationServer(server, reg)
	go func() { _ = server.Serve(listener) }()
	// Graceful: the plugin's Register call must get its answer (a failed Register makes the plugin retry in 30 s).
	defer server.GracefulStop()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var req *pluginapi.RegisterRequest
	select {
	case req = <-reg.requests:
	case <-ctx.Done():
		return nil, fmt.Errorf("no device plugin registered on %s within %s", socket, timeout)
	}
	out := &report{Register: protoJSON(req), Options: json.RawMessage("null")}

	endpoint := filepath.Join(filepath.Dir(socket), req.Endpoint)
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return out, fmt.Errorf("dialling the plugin at %s: %w", endpoint, err)
	}
	defer conn.Close()
	client := pluginapi.NewDevicePluginClient(conn)
	options, err := client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		return out, fmt.Errorf("GetDevicePluginOptions: %w", err)
	}
	out.Options = protoJSON(options)
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		return out, fmt.Errorf("ListAndWatch: %w", err)
	}
	first, err := stream.Recv()
	if err != nil {
		return out, fmt.Errorf("ListAndWatch: first answer: %w", err)
	}
	for _, device := range first.Devices {
		out.Devices = append(out.Devices, protoJSON(device))
	}
	out.DeviceCount = len(first.Devices)
	if len(first.Devices) > 0 {
		out.Allocate = append(out.Allocate, allocate(ctx, client, []string{first.Devices[0].ID}))
	}
	if len(first.Devices) > 1 {
		out.Allocate = append(out.Allocate, allocate(ctx, client, []string{first.Devices[0].ID, first.Devices[1].ID}))
	}
	return out, nil
}

func main() {
	socket := flag.String("socket", pluginapi.KubeletSocket, "the kubelet registration socket to serve")
	timeout := flag.Duration("timeout", 60*time.Second, "how long to wait for a plugin to register and answer")
	outPath := flag.String("out", "", "write the JSON report here (default: stdout)")
	flag.Parse()

	out, err := run(*socket, *timeout)
	if out != nil {
		data, _ := json.MarshalIndent(out, "", "  ")
		if *outPath == "" {
			fmt.Println(string(data))
		} else if werr := os.WriteFile(*outPath, append(data, '\n'), 0o644); werr != nil {
			fmt.Fprintln(os.Stderr, "mini-kubelet:", werr)
			os.Exit(2)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mini-kubelet:", err)
		os.Exit(1)
	}
}
