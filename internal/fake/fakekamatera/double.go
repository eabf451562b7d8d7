// Package fakekamatera is a stand-in for Kamatera's cloudcli server API
// (the REST API cluster-autoscaler's Kamatera provider, and nodetide's, talk
// to): an httptest server with the same paths, auth headers and JSON shapes,
// whose state tests drive directly.
//
// Served:
//
//	GET  /service/servers             [{"id","datacenter","name","power"}]
//	POST /server/tags                 {"name"} → [{"tagName"}]
//	POST /service/server/info         {"name": <regular expression>} → [{"id","datacenter","cpu","name","ram",
//	                                  "power","diskSizes","networks","billing","traffic","managed","backup",
//	                                  "priceMonthlyOn","priceHourlyOn","priceHourlyOff"}]
//	POST /service/server              create → ["<command id>"], or {"password","commandIds"} when
//	                                  the password is "__generate__"
//	GET  /service/queue?id=<id>       [{"id","status","log","commandInfo","serviceName"}]
//	                                  (no id: every command)
//	POST /service/server/terminate    {"name","force"} → ["<command id>"]
//	POST /service/server/poweroff|on  {"name"} → ["<command id>"]
//
// Every request must carry AuthClientId / AuthSecret; otherwise the answer is
// 401 {"message": "Authentication failed"} (or 200 with the same body, see
// WithAuthFailureStatus). Application errors are 500 with
// {"message": …}, as Kamatera answers them.
//
// A create makes a queue command in state "pending" and a powered-off server
// (listed at once, with its tags); the test then calls Complete (the server
// powers on) or Fail (the command ends in "error" with a log, and the server
// goes away). WithAutoComplete completes creates by itself after a delay.
// OnCreate and OnComplete let a test bed react, e.g. register a Node with
// the server's provider ID once it "boots". InjectStatus and InjectDelay make
// the next requests to a path fail or hang.
//
// Where it may differ from Kamatera (whose API is not formally documented):
// the exact wording of error messages and the status codes of application
// errors (500 here); whether and when a server being created is listed
// (here: at once, powered off) and whether a failed create leaves a server
// behind (here: no); terminate matches the name exactly (Kamatera takes a
// regular expression) and completes at once unless WithQueuedTerminates or
// FailTerminates (Kamatera queues it, and may fail it); power on and off
// complete at once; command
// IDs are strings unless WithNumericCommandIDs; an unknown command ID gives
// an empty list; server names must be unique; only quantity 1 is accepted.
// A create naming a field the API does not read (e.g. "billingCycle" for
// "billingcycle") is refused, as a strict server would; whether Kamatera
// refuses it or ignores it is not documented. Server info matches the name
// as a regular expression anywhere in the server's name (Go's syntax; how
// Kamatera anchors it is not documented) and answers the key set Kamatera
// answers; its prices are decimal strings in USD (the answer names no
// currency), Server's own or else a sample formula of the double's
// (0.01 per core-hour plus 0.005 per GB of RAM, 0.004 off, 720 hours a
// month), not Kamatera's price list.
package fakekamatera

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Default credentials the double accepts.
const (
	DefaultClientID = "double-client-id"
	DefaultSecret   = "double-secret"
)

// Command states, as Kamatera's queue reports them.
const (
	StatusPending   = "pending"
	StatusComplete  = "complete"
	StatusError     = "error"
	StatusCancelled = "cancelled"
)

// Command infos.
const (
	InfoCreate    = "Create Server"
	InfoTerminate = "Terminate Server"
	InfoPowerOff  = "Power Off Server"
	InfoPowerOn   = "Power On Server"
)

// Server is one server of the double.
type Server struct {
	ID         string
	Name       string
	Datacenter string
	CPU        string
	RAM        string
	Power      bool
	Tags       []string
	// Billing is "hourly" (default) or "monthly".
	Billing string
	// PriceHourlyOn, PriceHourlyOff and PriceMonthlyOn are what server info
	// answers (decimal strings, USD); empty ones follow the sample formula.
	PriceHourlyOn, PriceHourlyOff, PriceMonthlyOn string
}

// Command is one queue command.
type Command struct {
	ID         string
	Info       string
	ServerName string
	Status     string
	Log        string
}

// CreateRequest is a decoded POST /service/server body.
type CreateRequest struct {
	Name               string `json:"name"`
	Password           string `json:"password"`
	PasswordValidate   string `json:"passwordValidate"`
	SSHKey             string `json:"ssh-key"`
	Datacenter         string `json:"datacenter"`
	Image              string `json:"image"`
	CPU                string `json:"cpu"`
	RAM                string `json:"ram"`
	Disk               string `json:"disk"`
	DailyBackup        string `json:"dailybackup"`
	Managed            string `json:"managed"`
	Network            string `json:"network"`
	Quantity           int    `json:"quantity"`
	BillingCycle       string `json:"billingcycle"`
	MonthlyPackage     string `json:"monthlypackage"`
	PowerOnAfterCreate string `json:"poweronaftercreate"`
	ScriptFile         string `json:"script-file"`
	UserdataFile       string `json:"userdata-file"`
	Tag                string `json:"tag"`
}

// createFields are the JSON names of CreateRequest, exactly as the API reads
// them.
var createFields = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[CreateRequest]()
	for i := range t.NumField() {
		out[strings.Split(t.Field(i).Tag.Get("json"), ",")[0]] = true
	}
	return out
}()

// Tags, Disks and Networks split the space-separated lists.
func (r CreateRequest) Tags() []string     { return strings.Fields(r.Tag) }
func (r CreateRequest) Disks() []string    { return strings.Fields(r.Disk) }
func (r CreateRequest) Networks() []string { return strings.Fields(r.Network) }

// Request is one request the double received (headers are not kept).
type Request struct {
	Method string
	Path   string
	Query  string
	Body   string
}

// Option tunes New.
type Option func(*Double)

// WithCredentials sets the API key the double accepts.
func WithCredentials(clientID, secret string) Option {
	return func(d *Double) { d.clientID, d.secret = clientID, secret }
}

// WithAutoComplete completes every create after delay (for demos).
func WithAutoComplete(delay time.Duration) Option {
	return func(d *Double) { d.autoComplete, d.autoDelay = true, delay }
}

// WithAuthFailureStatus sets the status a rejected key is answered with
// (default 401). Kamatera has been seen to answer 200 with the same
// {"message"} body, which a client must not take for a result.
func WithAuthFailureStatus(status int) Option {
	return func(d *Double) { d.authFailureStatus = status }
}

// WithQueuedTerminates leaves every terminate command pending (its server
// listed) until the test calls Complete (the server goes) or Fail (it stays).
// Without it a terminate completes at once.
func WithQueuedTerminates() Option {
	return func(d *Double) { d.queuedTerminates = true }
}

// WithNumericCommandIDs answers command IDs as JSON numbers.
func WithNumericCommandIDs() Option {
	return func(d *Double) { d.numericIDs = true }
}

// Double is the fake API. Its methods are safe for concurrent use.
type Double struct {
	srv              *httptest.Server
	clientID, secret string
	autoComplete     bool
	autoDelay        time.Duration
	numericIDs       bool
	// authFailureStatus answers a rejected key.
	authFailureStatus int
	queuedTerminates  bool

	mu       sync.Mutex
	servers  map[string]*Server
	commands map[string]*Command
	order    []string
	nextID   int
	faults   []*fault
	// failTerminates is how many terminate commands still to end in error,
	// with failLog.
	failTerminates int
	failLog        string
	requests       []Request
	creates        []CreateRequest
	onCreate       func(CreateRequest, string)
	onComplete     func(Server)
	onTerminate    func(string)
	timers         []*time.Timer
	closed         bool
}

type fault struct {
	path   string
	status int
	delay  time.Duration
	left   int
}

// New starts a double; Close it when done.
func New(opts ...Option) *Double {
	d := &Double{
		clientID: DefaultClientID,
		secret:   DefaultSecret,
		servers:  map[string]*Server{},
		commands: map[string]*Command{},
		nextID:   1000,

		authFailureStatus: http.StatusUnauthorized,
	}
	for _, o := range opts {
		o(d)
	}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	return d
}

// URL is the API URL to put in kamatera-api-url.
func (d *Double) URL() string { return d.srv.URL }

// ClientID and Secret are the accepted credentials.
func (d *Double) ClientID() string { return d.clientID }
func (d *Double) Secret() string   { return d.secret }

// Close stops the server and any pending auto-completion.
func (d *Double) Close() {
	d.mu.Lock()
	d.closed = true
	for _, t := range d.timers {
		t.Stop()
	}
	d.mu.Unlock()
	d.srv.Close()
}

// OnCreate is called after each accepted create, with the request and the
// command ID (outside the double's lock: it may call the double).
func (d *Double) OnCreate(f func(req CreateRequest, commandID string)) {
	d.mu.Lock()
	d.onCreate = f
	d.mu.Unlock()
}

// OnComplete is called when a create completes and its server powers on.
func (d *Double) OnComplete(f func(Server)) {
	d.mu.Lock()
	d.onComplete = f
	d.mu.Unlock()
}

// OnTerminate is called after a server is terminated.
func (d *Double) OnTerminate(f func(name string)) {
	d.mu.Lock()
	d.onTerminate = f
	d.mu.Unlock()
}

// AddServer adds an existing server (an ID is made up when empty).
func (d *Double) AddServer(s Server) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.ID == "" {
		s.ID = randomHex(16)
	}
	s.Tags = append([]string(nil), s.Tags...)
	d.servers[s.Name] = &s
}

// RemoveServer deletes a server at once, as someone deleting it in the
// console would.
func (d *Double) RemoveServer(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.servers, name)
}

// Servers returns the servers, by name.
func (d *Double) Servers() []Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Server, 0, len(d.servers))
	for _, s := range d.servers {
		c := *s
		c.Tags = append([]string(nil), s.Tags...)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Server returns one server.
func (d *Double) Server(name string) (Server, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.servers[name]
	if !ok {
		return Server{}, false
	}
	c := *s
	c.Tags = append([]string(nil), s.Tags...)
	return c, true
}

// Commands returns every queue command, oldest first.
func (d *Double) Commands() []Command {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Command, 0, len(d.order))
	for _, id := range d.order {
		out = append(out, *d.commands[id])
	}
	return out
}

// PendingCreates returns the create commands not yet complete or failed.
func (d *Double) PendingCreates() []Command {
	var out []Command
	for _, c := range d.Commands() {
		if c.Info == InfoCreate && c.Status == StatusPending {
			out = append(out, c)
		}
	}
	return out
}

// CreateRequests returns the accepted create requests, in order.
func (d *Double) CreateRequests() []CreateRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]CreateRequest(nil), d.creates...)
}

// Requests returns every request received, in order.
func (d *Double) Requests() []Request {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Request(nil), d.requests...)
}

// RequestCount counts the requests with that method and path.
func (d *Double) RequestCount(method, path string) int {
	n := 0
	for _, r := range d.Requests() {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
}

// Complete completes a pending command: a create's server powers on, a
// terminate's server goes.
func (d *Double) Complete(commandID string) error {
	d.mu.Lock()
	c, ok := d.commands[commandID]
	if !ok || c.Status != StatusPending {
		d.mu.Unlock()
		return fmt.Errorf("no pending command %q", commandID)
	}
	c.Status = StatusComplete
	if c.Info == InfoTerminate {
		delete(d.servers, c.ServerName)
		f := d.onTerminate
		d.mu.Unlock()
		if f != nil {
			f(c.ServerName)
		}
		return nil
	}
	var done *Server
	if s, ok := d.servers[c.ServerName]; ok && c.Info == InfoCreate {
		s.Power = true
		cp := *s
		cp.Tags = append([]string(nil), s.Tags...)
		done = &cp
	}
	f := d.onComplete
	d.mu.Unlock()
	if done != nil && f != nil {
		f(*done)
	}
	return nil
}

// FailTerminates makes the next n terminate commands end in "error" with
// log; their servers stay, powered as they were.
func (d *Double) FailTerminates(n int, log string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failTerminates, d.failLog = n, log
}

// CompleteAll completes every pending create and returns their IDs.
func (d *Double) CompleteAll() []string {
	var ids []string
	for _, c := range d.PendingCreates() {
		if d.Complete(c.ID) == nil {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// Fail ends a pending command in "error" with log; a create's server is
// removed, a terminate's stays.
func (d *Double) Fail(commandID, log string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.commands[commandID]
	if !ok || c.Status != StatusPending {
		return fmt.Errorf("no pending command %q", commandID)
	}
	c.Status, c.Log = StatusError, log
	if c.Info == InfoCreate {
		delete(d.servers, c.ServerName)
	}
	return nil
}

// InjectStatus makes the next times requests to path ("" for any) answer
// status with a {"message"} body.
func (d *Double) InjectStatus(path string, status, times int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = append(d.faults, &fault{path: path, status: status, left: times})
}

// InjectDelay makes the next times requests to path ("" for any) wait delay
// before being served. The request is carried out even when the client has
// given up meanwhile, as a slow server would, so a timed-out create may
// still make a server.
func (d *Double) InjectDelay(path string, delay time.Duration, times int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = append(d.faults, &fault{path: path, delay: delay, left: times})
}

// ClearFaults drops the injected faults.
func (d *Double) ClearFaults() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = nil
}

// takeFault returns the fault for this request, if any; d.mu is held.
func (d *Double) takeFault(path string) *fault {
	for i, f := range d.faults {
		if f.path == "" || f.path == path {
			f.left--
			if f.left <= 0 {
				d.faults = append(d.faults[:i], d.faults[i+1:]...)
			}
			return f
		}
	}
	return nil
}

func (d *Double) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	d.mu.Lock()
	d.requests = append(d.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body)})
	f := d.takeFault(r.URL.Path)
	d.mu.Unlock()
	if f != nil {
		if f.delay > 0 {
			// Like a slow server, the double finishes the request even if
			// the client gave up: a timed-out call may still have acted.
			time.Sleep(f.delay)
		}
		if f.status != 0 {
			writeJSON(w, f.status, map[string]string{"message": fmt.Sprintf("%s (injected)", http.StatusText(f.status))})
			return
		}
	}
	if r.Header.Get("AuthClientId") != d.clientID || r.Header.Get("AuthSecret") != d.secret {
		writeJSON(w, d.authFailureStatus, map[string]string{"message": "Authentication failed"})
		return
	}
	route := r.Method + " " + r.URL.Path
	var (
		out    any
		status = http.StatusOK
		err    error
	)
	switch route {
	case "GET /service/servers":
		out = d.list()
	case "POST /server/tags":
		out, err = d.tags(body)
	case "POST /service/server/info":
		out, err = d.info(body)
	case "POST /service/server":
		out, err = d.create(body)
	case "GET /service/queue":
		out = d.queue(r.URL.Query().Get("id"))
	case "POST /service/server/terminate":
		out, err = d.terminate(body)
	case "POST /service/server/poweroff":
		out, err = d.power(body, false)
	case "POST /service/server/poweron":
		out, err = d.power(body, true)
	default:
		status, out = http.StatusNotFound, map[string]string{"message": "Not Found"}
	}
	if err != nil {
		status, out = http.StatusInternalServerError, map[string]string{"message": err.Error()}
	}
	writeJSON(w, status, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type listRow struct {
	ID         string `json:"id"`
	Datacenter string `json:"datacenter"`
	Name       string `json:"name"`
	Power      string `json:"power"`
}

func power(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func (d *Double) list() []listRow {
	out := []listRow{}
	for _, s := range d.Servers() {
		out = append(out, listRow{ID: s.ID, Datacenter: s.Datacenter, Name: s.Name, Power: power(s.Power)})
	}
	return out
}

// apiMessage is an application error, worded as Kamatera words them (hence
// the capitals).
type apiMessage string

func (m apiMessage) Error() string { return string(m) }

func apiMessagef(format string, args ...any) apiMessage {
	return apiMessage(fmt.Sprintf(format, args...))
}

const errNoServers = apiMessage("No servers found")

func decodeName(body []byte) (string, error) {
	var req struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Name == "" {
		return "", apiMessage("Missing server name")
	}
	return req.Name, nil
}

func (d *Double) tags(body []byte) (any, error) {
	name, err := decodeName(body)
	if err != nil {
		return nil, err
	}
	s, ok := d.Server(name)
	if !ok {
		return nil, errNoServers
	}
	out := []map[string]string{}
	for _, t := range s.Tags {
		out = append(out, map[string]string{"tagName": t})
	}
	return out, nil
}

func (d *Double) info(body []byte) (any, error) {
	name, err := decodeName(body)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(name)
	if err != nil {
		return nil, apiMessagef("Invalid server name pattern %q", name)
	}
	var out []map[string]any
	for _, s := range d.Servers() {
		if re.MatchString(s.Name) {
			out = append(out, infoOf(s))
		}
	}
	if len(out) == 0 {
		return nil, errNoServers
	}
	return out, nil
}

func infoOf(s Server) map[string]any {
	billing := s.Billing
	if billing == "" {
		billing = "hourly"
	}
	on, off, month := s.PriceHourlyOn, s.PriceHourlyOff, s.PriceMonthlyOn
	if on == "" || off == "" || month == "" {
		cores, _ := strconv.Atoi(strings.TrimRight(s.CPU, "ABCDTZ"))
		ram, _ := strconv.Atoi(s.RAM)
		hourly := 0.01*float64(cores) + 0.005*float64(ram)/1024
		on, off, month = fmt.Sprintf("%.4f", hourly), "0.0040", fmt.Sprintf("%.2f", hourly*720)
	}
	return map[string]any{
		"id": s.ID, "datacenter": s.Datacenter, "cpu": s.CPU, "name": s.Name, "ram": s.RAM, "power": power(s.Power),
		"diskSizes": []int{20}, "networks": []map[string]any{{"network": "wan-" + strings.ToLower(s.Datacenter), "ips": []string{"203.0.113.10"}}},
		"billing": billing, "traffic": "t5000", "managed": "0", "backup": "0",
		"priceMonthlyOn": month, "priceHourlyOn": on, "priceHourlyOff": off,
	}
}

var (
	serverNameRE = regexp.MustCompile(`^[A-Za-z0-9()_-]{4,}$`)
	tagRE        = regexp.MustCompile(`^[A-Za-z0-9._\- ]{3,24}$`)
)

func (d *Double) create(body []byte) (any, error) {
	var req CreateRequest
	// The server refuses what it does not read, so that a misspelt option
	// (say "billingCycle") is an error rather than silently the default.
	// encoding/json matches names case-insensitively, so names are checked
	// exactly first.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, apiMessagef("Invalid request: %v", err)
	}
	for name := range fields {
		if !createFields[name] {
			return nil, apiMessagef("Invalid request: unknown field %q", name)
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, apiMessagef("Invalid request: %v", err)
	}
	billing := req.BillingCycle
	switch {
	case !serverNameRE.MatchString(req.Name):
		return nil, apiMessagef("Invalid server name %q", req.Name)
	case req.Datacenter == "", req.Image == "", req.CPU == "", req.RAM == "":
		return nil, apiMessage("Missing required server option (datacenter, image, cpu, ram)")
	case req.Disk == "":
		return nil, apiMessage("At least one disk is required")
	case req.Network == "":
		return nil, apiMessage("At least one network is required")
	case req.Password != req.PasswordValidate:
		return nil, apiMessage("Password validation mismatch")
	case req.Quantity != 1:
		return nil, apiMessagef("Unsupported quantity %d", req.Quantity)
	case billing != "" && billing != "hourly" && billing != "monthly":
		return nil, apiMessagef("Invalid billing cycle %q", billing)
	case req.DailyBackup != "" && req.DailyBackup != "yes" && req.DailyBackup != "no",
		req.Managed != "" && req.Managed != "yes" && req.Managed != "no":
		return nil, apiMessage("Invalid yes/no option")
	}
	if _, err := strconv.Atoi(req.RAM); err != nil {
		return nil, apiMessagef("Invalid ram %q", req.RAM)
	}
	for _, t := range req.Tags() {
		if !tagRE.MatchString(t) {
			return nil, apiMessagef("Invalid tag %q", t)
		}
	}
	d.mu.Lock()
	if _, exists := d.servers[req.Name]; exists {
		d.mu.Unlock()
		return nil, apiMessagef("Server name %q is already in use", req.Name)
	}
	d.servers[req.Name] = &Server{ID: randomHex(16), Name: req.Name, Datacenter: req.Datacenter, CPU: req.CPU, RAM: req.RAM, Tags: req.Tags(), Billing: billing}
	id := d.newCommand(InfoCreate, req.Name, StatusPending)
	d.creates = append(d.creates, req)
	f := d.onCreate
	if d.autoComplete && !d.closed {
		d.timers = append(d.timers, time.AfterFunc(d.autoDelay, func() { _ = d.Complete(id) }))
	}
	d.mu.Unlock()
	if f != nil {
		f(req, id)
	}
	ids := d.idList(id)
	if req.Password == "__generate__" {
		return map[string]any{"password": "Gen" + randomHex(6) + "9", "commandIds": ids}, nil
	}
	return ids, nil
}

// newCommand records a command; d.mu is held.
func (d *Double) newCommand(info, server, status string) string {
	d.nextID++
	id := strconv.Itoa(d.nextID)
	d.commands[id] = &Command{ID: id, Info: info, ServerName: server, Status: status}
	d.order = append(d.order, id)
	return id
}

func (d *Double) idList(id string) []any {
	if d.numericIDs {
		n, _ := strconv.Atoi(id)
		return []any{n}
	}
	return []any{id}
}

type queueRow struct {
	ID          any    `json:"id"`
	Status      string `json:"status"`
	Log         string `json:"log,omitempty"`
	CommandInfo string `json:"commandInfo"`
	ServiceName string `json:"serviceName"`
}

func (d *Double) queue(id string) []queueRow {
	out := []queueRow{}
	for _, c := range d.Commands() {
		if id != "" && c.ID != id {
			continue
		}
		row := queueRow{ID: c.ID, Status: c.Status, Log: c.Log, CommandInfo: c.Info, ServiceName: c.ServerName}
		if d.numericIDs {
			row.ID = d.idList(c.ID)[0]
		}
		out = append(out, row)
	}
	return out
}

func (d *Double) terminate(body []byte) (any, error) {
	var req struct {
		Name  string `json:"name"`
		Force bool   `json:"force"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Name == "" {
		return nil, apiMessage("Missing server name")
	}
	d.mu.Lock()
	s, ok := d.servers[req.Name]
	if !ok {
		d.mu.Unlock()
		return nil, errNoServers
	}
	if s.Power && !req.Force {
		d.mu.Unlock()
		return nil, apiMessage("Server is powered on: power it off or use force")
	}
	if d.failTerminates > 0 {
		d.failTerminates--
		id := d.newCommand(InfoTerminate, req.Name, StatusError)
		d.commands[id].Log = d.failLog
		d.mu.Unlock()
		return d.idList(id), nil
	}
	if d.queuedTerminates {
		id := d.newCommand(InfoTerminate, req.Name, StatusPending)
		d.mu.Unlock()
		return d.idList(id), nil
	}
	delete(d.servers, req.Name)
	id := d.newCommand(InfoTerminate, req.Name, StatusComplete)
	f := d.onTerminate
	d.mu.Unlock()
	if f != nil {
		f(req.Name)
	}
	return d.idList(id), nil
}

func (d *Double) power(body []byte, on bool) (any, error) {
	name, err := decodeName(body)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.servers[name]
	if !ok {
		return nil, errNoServers
	}
	s.Power = on
	info := InfoPowerOff
	if on {
		info = InfoPowerOn
	}
	return d.idList(d.newCommand(info, name, StatusComplete)), nil
}

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
