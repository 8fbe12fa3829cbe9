import PushEventLoop

extension HostPort {
    /// Loopback targets can be reached from any 127.0.0.x source address.
    var isIPv4Loopback: Bool { host.hasPrefix("127.") }
    /// 127.x.x.x or ::1, written numerically.
    var isLoopback: Bool {
        host == "::1" || (isIPv4Loopback && host.split(separator: ".").count == 4 && host.split(separator: ".").allSatisfy { UInt8($0) != nil })
    }
}
