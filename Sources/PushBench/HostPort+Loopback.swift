import PushEventLoop

extension HostPort {
    /// Loopback targets can be reached from any 127.0.0.x source address.
    var isIPv4Loopback: Bool { host.hasPrefix("127.") }
}
