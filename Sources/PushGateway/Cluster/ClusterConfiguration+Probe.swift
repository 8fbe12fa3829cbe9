import PushNATS

extension ClusterConfiguration {
    /// Fails at once when a NATS server refuses this node (its TLS certificate not trusted,
    /// the node's own missing or rejected, wrong credentials): the cluster's connections
    /// retry every failure for ever, so without this a refused node would only wait.
    /// Passes when connected, and when no server answers yet (one started later is found).
    public func checkNATSAccess() throws(NATSError) {
        try NATSConnection.probe(servers: servers, name: "securepush-gateway-\(node)-check", security: security)
    }
}
