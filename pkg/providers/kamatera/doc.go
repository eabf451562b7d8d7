// Package kamatera is the node-group provider for Kamatera servers, driven by
// cluster-autoscaler's Kamatera cloud config (an INI file) read unchanged,
// and speaking the same REST API cluster-autoscaler uses (the cloudcli
// server, https://cloudcli.cloudwm.com). There is no Go SDK; the client here
// is small:
//
//	GET  /service/servers            list servers (name, power)
//	POST /server/tags                a server's tags
//	POST /service/server/info        a server's details and prices (NodeGroup.Price)
//	POST /service/server             create one server (queued; returns a command ID)
//	GET  /service/queue?id=<id>      a queued command's status: complete, error, or in progress
//	POST /service/server/terminate   delete a server (force: also when powered on); queued
//	POST /service/server/poweroff|on power a server off or on (power-off mode); queued
//
// A 200 answer whose body is {"message": …} in place of the result is an
// error too (Kamatera answers some that way, a rejected key among them).
//
// Every call carries the AuthClientId / AuthSecret headers. Reads and
// terminations are retried with exponential backoff on 5xx, 429 and
// timeouts, never on other 4xx; a create is retried only when Kamatera
// surely did nothing (429, 503, connection refused), since repeating it could
// make two servers. A create whose outcome is unknown (a timeout, a 500)
// still counts as creating for a few minutes, and is followed through the
// listing: if its server appears, it is the group's like any other.
//
// Groups. Each `[nodegroup "name"]` section is a group; its servers are the
// ones tagged both k8sca-<cluster-name> and k8scang-<name> (and, when
// filter-name-prefix is set, whose name starts with it). New servers are
// named <name-prefix>-<11 random hex digits>, as cluster-autoscaler names
// them, and their provider ID is kamatera://<server name> (or
// provider-id-prefix).
//
// Sizes. IncreaseSize queues the creates and returns; the provider then
// follows each command in Kamatera's queue: an instance is "creating" until
// its command completes and the server is listed powered on, then "running".
// A failed command (or one still unfinished after WithCreateTimeout) turns
// into a failed scale-up: the instance stays listed for a while with
// Instance.Error set, and no longer counts in TargetSize, which is the
// powered-on servers plus the creates still in progress. DecreaseTargetSize
// gives up creates in progress (terminating their servers once they exist);
// DeleteInstance terminates one server and follows the terminate command
// in the queue (a failed one is retried, then reported; the server then
// counts as running again). Outside power-off mode a powered-off server the
// provider did not create is taken for a deletion that did not finish:
// "deleting", not counted. Creates in progress are known only to
// the Provider that queued them, so one Provider should live as long as the
// process.
//
// Power-off mode (cluster-autoscaler's poweroff-on-scale-down,
// poweron-on-scale-up and poweroff-on-scale-down-max-servers in [global]):
// DeleteInstance powers a server off and keeps it, up to the max per group
// (past it, it terminates); IncreaseSize powers kept servers on before it
// creates. A powered-off server is then not an instance of the group, and
// never counts.
//
// Nodes. Kamatera clusters usually run no cloud controller manager, so
// nothing deletes the Node object of a terminated server: removing a node
// must also delete its Node (nodetide's drain does, in its RemoveNode step).
// For the same reason the kubelet must set spec.providerID itself: the init
// script (script-base64) should pass --provider-id=kamatera://$(hostname)
// (the server name is the hostname) and, for the template's group label,
// --node-labels=nodetide.io/node-group=<group>.
//
// Prices. Kamatera's API prices existing servers only (server info's
// priceHourlyOn / priceMonthlyOn); it has no price list to ask what a server
// not yet made would cost. NodeGroup.Price reads the price off a running
// server of the group with the group's cpu and ram and caches it under the
// group's server configuration; a group that has no such server (and no
// fresh cached price) has no price from the API: give it one in the config.
//
// API key. The key needs to list servers and read their tags, create servers
// (with tags, in the configured datacenters, images and billing), read the
// queue, and terminate servers. Kamatera API keys are account-wide; use a
// dedicated key (or sub-account) so it can be revoked on its own.
package kamatera
