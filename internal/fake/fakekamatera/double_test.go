package fakekamatera_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/fake/fakekamatera"
)

// call sends a request with the double's credentials (or the given ones).
func call(t *testing.T, d *fakekamatera.Double, method, path string, body any, creds ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	id, secret := d.ClientID(), d.Secret()
	if len(creds) == 2 {
		id, secret = creds[0], creds[1]
	}
	req.Header.Set("AuthClientId", id)
	req.Header.Set("AuthSecret", secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(data))
}

func createBody(name, password string) map[string]any {
	return map[string]any{
		"name": name, "password": password, "passwordValidate": password, "datacenter": "EU", "image": "ubuntu",
		"cpu": "2A", "ram": "2048", "disk": "size=20", "network": "name=wan,ip=auto", "quantity": 1,
		"billingcycle": "hourly", "dailybackup": "no", "managed": "no", "poweronaftercreate": "yes",
		"script-file": "#!/bin/sh\n", "tag": "k8sca-c k8scang-g",
	}
}

func TestAuth(t *testing.T) {
	d := fakekamatera.New(fakekamatera.WithCredentials("cid", "sec"))
	defer d.Close()
	tests := []struct {
		id, secret string
		status     int
	}{
		{"cid", "sec", 200},
		{"cid", "wrong", 401},
		{"", "", 401},
	}
	for _, tt := range tests {
		status, body := call(t, d, http.MethodGet, "/service/servers", nil, tt.id, tt.secret)
		if status != tt.status {
			t.Errorf("%s/%s: %d %s", tt.id, tt.secret, status, body)
		}
		if status == 401 && body != `{"message":"Authentication failed"}` {
			t.Errorf("401 body %s", body)
		}
	}
}

func TestCreateQueueComplete(t *testing.T) {
	d := fakekamatera.New()
	defer d.Close()
	var created []string
	var completed []fakekamatera.Server
	var mu sync.Mutex
	d.OnCreate(func(r fakekamatera.CreateRequest, id string) {
		mu.Lock()
		created = append(created, r.Name+"/"+id)
		mu.Unlock()
	})
	d.OnComplete(func(s fakekamatera.Server) {
		mu.Lock()
		completed = append(completed, s)
		mu.Unlock()
	})
	status, body := call(t, d, http.MethodPost, "/service/server", createBody("node-abc123", "Passw0rd123"))
	var ids []string
	if status != 200 || json.Unmarshal([]byte(body), &ids) != nil || len(ids) != 1 {
		t.Fatalf("create: %d %s", status, body)
	}
	if _, body := call(t, d, http.MethodGet, "/service/servers", nil); body != `[{"id":"`+mustServer(t, d, "node-abc123").ID+`","datacenter":"EU","name":"node-abc123","power":"off"}]` {
		t.Errorf("list while creating: %s", body)
	}
	if _, body := call(t, d, http.MethodGet, "/service/queue?id="+ids[0], nil); !strings.Contains(body, `"status":"pending"`) || !strings.Contains(body, `"commandInfo":"Create Server"`) {
		t.Errorf("queue: %s", body)
	}
	if _, body := call(t, d, http.MethodPost, "/server/tags", map[string]string{"name": "node-abc123"}); body != `[{"tagName":"k8sca-c"},{"tagName":"k8scang-g"}]` {
		t.Errorf("tags: %s", body)
	}
	if err := d.Complete(ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := d.Complete(ids[0]); err == nil {
		t.Error("completed twice")
	}
	if _, body := call(t, d, http.MethodGet, "/service/queue?id="+ids[0], nil); !strings.Contains(body, `"status":"complete"`) {
		t.Errorf("queue: %s", body)
	}
	if !mustServer(t, d, "node-abc123").Power {
		t.Error("not powered on")
	}
	if len(created) != 1 || created[0] != "node-abc123/"+ids[0] || len(completed) != 1 || completed[0].Name != "node-abc123" {
		t.Errorf("callbacks: %v %v", created, completed)
	}
	if status, body := call(t, d, http.MethodPost, "/service/server", createBody("node-abc123", "Passw0rd123")); status != 500 || !strings.Contains(body, "already in use") {
		t.Errorf("duplicate name: %d %s", status, body)
	}
}

func mustServer(t *testing.T, d *fakekamatera.Double, name string) fakekamatera.Server {
	t.Helper()
	s, ok := d.Server(name)
	if !ok {
		t.Fatalf("no server %s", name)
	}
	return s
}

func TestCreateValidation(t *testing.T) {
	d := fakekamatera.New()
	defer d.Close()
	tests := []struct {
		name   string
		change func(map[string]any)
		msg    string
	}{
		{"bad name", func(b map[string]any) { b["name"] = "a.b" }, "Invalid server name"},
		{"no disk", func(b map[string]any) { b["disk"] = "" }, "disk"},
		{"no network", func(b map[string]any) { b["network"] = "" }, "network"},
		{"password mismatch", func(b map[string]any) { b["passwordValidate"] = "x" }, "Password"},
		{"quantity", func(b map[string]any) { b["quantity"] = 2 }, "quantity"},
		{"long tag", func(b map[string]any) { b["tag"] = "k8scang-aaaaaaaaaaaaaaaaaaaa" }, "Invalid tag"},
		{"ram", func(b map[string]any) { b["ram"] = "2GB" }, "Invalid ram"},
		{"billing cycle", func(b map[string]any) { b["billingcycle"] = "weekly" }, "Invalid billing cycle"},
		{"misspelt field", func(b map[string]any) { delete(b, "billingcycle"); b["billingCycle"] = "monthly" }, `unknown field \"billingCycle\"`},
	}
	for i, tt := range tests {
		body := createBody("srv-"+string(rune('a'+i))+"xyz", "Passw0rd123")
		tt.change(body)
		status, out := call(t, d, http.MethodPost, "/service/server", body)
		if status != 500 || !strings.Contains(out, tt.msg) {
			t.Errorf("%s: %d %s", tt.name, status, out)
		}
	}
}

func TestGeneratedPasswordAndNumericIDs(t *testing.T) {
	d := fakekamatera.New(fakekamatera.WithNumericCommandIDs())
	defer d.Close()
	_, body := call(t, d, http.MethodPost, "/service/server", createBody("node-gen", "__generate__"))
	var out struct {
		Password   string `json:"password"`
		CommandIDs []int  `json:"commandIds"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || out.Password == "" || len(out.CommandIDs) != 1 {
		t.Fatalf("%s: %v", body, err)
	}
	if _, body := call(t, d, http.MethodGet, "/service/queue", nil); !strings.Contains(body, `"id":1001`) {
		t.Errorf("queue list: %s", body)
	}
}

func TestFail(t *testing.T) {
	d := fakekamatera.New()
	defer d.Close()
	call(t, d, http.MethodPost, "/service/server", createBody("node-fail", "Passw0rd123"))
	id := d.PendingCreates()[0].ID
	if err := d.Fail(id, "Insufficient balance"); err != nil {
		t.Fatal(err)
	}
	if _, body := call(t, d, http.MethodGet, "/service/queue?id="+id, nil); !strings.Contains(body, `"status":"error","log":"Insufficient balance"`) {
		t.Errorf("queue: %s", body)
	}
	if _, ok := d.Server("node-fail"); ok {
		t.Error("failed server kept")
	}
	if _, body := call(t, d, http.MethodGet, "/service/queue?id=424242", nil); body != "[]" {
		t.Errorf("unknown command: %s", body)
	}
}

func TestTerminate(t *testing.T) {
	d := fakekamatera.New()
	defer d.Close()
	d.AddServer(fakekamatera.Server{Name: "node-on", Power: true})
	var gone []string
	d.OnTerminate(func(n string) { gone = append(gone, n) })
	if status, body := call(t, d, http.MethodPost, "/service/server/terminate", map[string]any{"name": "node-on"}); status != 500 || !strings.Contains(body, "powered on") {
		t.Errorf("without force: %d %s", status, body)
	}
	if status, _ := call(t, d, http.MethodPost, "/service/server/terminate", map[string]any{"name": "node-on", "force": true}); status != 200 {
		t.Errorf("with force: %d", status)
	}
	if status, body := call(t, d, http.MethodPost, "/service/server/terminate", map[string]any{"name": "node-on", "force": true}); status != 500 || body != `{"message":"No servers found"}` {
		t.Errorf("again: %d %s", status, body)
	}
	if len(gone) != 1 || len(d.Servers()) != 0 {
		t.Errorf("terminated %v, left %v", gone, d.Servers())
	}
}

func TestFaults(t *testing.T) {
	d := fakekamatera.New()
	defer d.Close()
	d.InjectStatus("/service/servers", 502, 2)
	for i, want := range []int{502, 502, 200} {
		if status, _ := call(t, d, http.MethodGet, "/service/servers", nil); status != want {
			t.Errorf("request %d: %d, want %d", i, status, want)
		}
	}
	d.InjectDelay("", 50*time.Millisecond, 1)
	start := time.Now()
	call(t, d, http.MethodGet, "/service/servers", nil)
	if time.Since(start) < 50*time.Millisecond {
		t.Error("no delay")
	}
	d.InjectStatus("", 500, 5)
	d.ClearFaults()
	if status, _ := call(t, d, http.MethodGet, "/service/servers", nil); status != 200 {
		t.Errorf("after ClearFaults: %d", status)
	}
	if status, _ := call(t, d, http.MethodGet, "/nope", nil); status != 404 {
		t.Errorf("unknown path: %d", status)
	}
	if n := d.RequestCount(http.MethodGet, "/service/servers"); n != 5 {
		t.Errorf("%d requests recorded", n)
	}
}

func TestAutoComplete(t *testing.T) {
	d := fakekamatera.New(fakekamatera.WithAutoComplete(10 * time.Millisecond))
	defer d.Close()
	done := make(chan fakekamatera.Server, 1)
	d.OnComplete(func(s fakekamatera.Server) { done <- s })
	call(t, d, http.MethodPost, "/service/server", createBody("node-auto", "Passw0rd123"))
	select {
	case s := <-done:
		if !s.Power || s.Name != "node-auto" {
			t.Errorf("%+v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not completed")
	}
}

func TestQueuedAndFailedTerminates(t *testing.T) {
	d := fakekamatera.New(fakekamatera.WithQueuedTerminates())
	defer d.Close()
	d.AddServer(fakekamatera.Server{Name: "node-a", Power: true})
	d.FailTerminates(1, "Server is locked")
	_, body := call(t, d, http.MethodPost, "/service/server/terminate", map[string]any{"name": "node-a", "force": true})
	var ids []string
	if json.Unmarshal([]byte(body), &ids) != nil || len(ids) != 1 {
		t.Fatalf("terminate: %s", body)
	}
	if _, body := call(t, d, http.MethodGet, "/service/queue?id="+ids[0], nil); !strings.Contains(body, `"status":"error","log":"Server is locked"`) {
		t.Errorf("failed terminate: %s", body)
	}
	if s := mustServer(t, d, "node-a"); !s.Power {
		t.Error("a failed terminate changed the server")
	}
	_, body = call(t, d, http.MethodPost, "/service/server/terminate", map[string]any{"name": "node-a", "force": true})
	if json.Unmarshal([]byte(body), &ids) != nil || len(ids) != 1 {
		t.Fatalf("terminate: %s", body)
	}
	if _, body := call(t, d, http.MethodGet, "/service/queue?id="+ids[0], nil); !strings.Contains(body, `"status":"pending"`) {
		t.Errorf("queued terminate: %s", body)
	}
	mustServer(t, d, "node-a") // listed until complete
	if err := d.Complete(ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Server("node-a"); ok {
		t.Error("completed terminate left the server")
	}
}

// Server info takes the name as a regular expression and answers
// Kamatera's key set, prices as decimal strings; no match is "No servers
// found".
func TestServerInfo(t *testing.T) {
	d := fakekamatera.New()
	defer d.Close()
	d.AddServer(fakekamatera.Server{Name: "w-1", Power: true, CPU: "2A", RAM: "4096", Datacenter: "EU"})
	d.AddServer(fakekamatera.Server{Name: "w-2", CPU: "2A", RAM: "4096", Datacenter: "EU", Billing: "monthly", PriceHourlyOn: "0.0310", PriceHourlyOff: "0.0040", PriceMonthlyOn: "20.00"})
	status, body := call(t, d, http.MethodPost, "/service/server/info", map[string]string{"name": "^w-[12]$"})
	var rows []map[string]any
	if err := json.Unmarshal([]byte(body), &rows); status != 200 || err != nil || len(rows) != 2 {
		t.Fatalf("%d %s", status, body)
	}
	keys := []string{"backup", "billing", "cpu", "datacenter", "diskSizes", "id", "managed", "name", "networks",
		"power", "priceHourlyOff", "priceHourlyOn", "priceMonthlyOn", "ram", "traffic"}
	for _, r := range rows {
		if len(r) != len(keys) {
			t.Errorf("keys of %v, want %v", r, keys)
		}
		for _, k := range keys {
			if _, ok := r[k]; !ok {
				t.Errorf("row %v lacks %s", r["name"], k)
			}
		}
	}
	if rows[0]["priceHourlyOn"] != "0.0400" || rows[0]["billing"] != "hourly" {
		t.Errorf("w-1 = %v, want the sample formula's 0.0400, hourly", rows[0])
	}
	if rows[1]["priceMonthlyOn"] != "20.00" || rows[1]["billing"] != "monthly" || rows[1]["power"] != "off" {
		t.Errorf("w-2 = %v", rows[1])
	}
	if status, body := call(t, d, http.MethodPost, "/service/server/info", map[string]string{"name": "^nope$"}); status != 500 || !strings.Contains(body, "No servers found") {
		t.Errorf("no match: %d %s", status, body)
	}
}
