#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PushProcess

/// Hosts made inside this machine as network namespaces (`ip netns`), for a gateway
/// cluster whose routing crosses a network: a bridge in the root namespace holds
/// 10.200.X.1/24, and namespace K gets a veth pair to it with 10.200.X.(10+K)/24 on its
/// side. The addresses are private (RFC 1918) and exist only on these virtual links, so no
/// packet leaves the machine; X comes from the pid and skips subnets already in use.
///
/// Needs root. Names carry the pid, so parallel runs do not collide; `remove()` (also on
/// deinit) deletes the namespaces, and with them their veth ends, then the bridge.
public final class NetworkNamespaces {
    public let namespaces: [String]
    public let bridge: String
    /// The root namespace's address on the bridge: where the nats-server and store listen.
    public let hostAddress: String
    /// Namespace K's address.
    public let addresses: [String]
    /// A second address of the root namespace on the bridge, for a service that one
    /// namespace can be cut off from (`cut(_:from:)`) while it still reaches `hostAddress`.
    public let secondHostAddress: String
    private var removed = false

    /// Whether namespaces can be made here: root, and `ip netns add` works.
    public static let available: Bool = {
        guard getuid() == 0 else { return false }
        let probe = "securepush-probe-\(getpid())"
        guard (try? run(["netns", "add", probe])) != nil else { return false }
        _ = try? run(["netns", "del", probe])
        return true
    }()

    public init(count: Int) throws {
        let pid = Int(getpid())
        let used = (try? NetworkNamespaces.run(["-4", "-o", "addr", "show"])) ?? ""
        var subnet = 1 + pid % 250
        while used.contains("10.200.\(subnet).") { subnet = 1 + subnet % 250 }
        bridge = "spbr\(pid % 10_000_000)"
        hostAddress = "10.200.\(subnet).1"
        secondHostAddress = "10.200.\(subnet).2"
        namespaces = (1...count).map { "securepush-\(pid)-\($0)" }
        addresses = (1...count).map { "10.200.\(subnet).\(10 + $0)" }
        // Removed even if this process dies before `remove()` (the veths go with them).
        for namespace in namespaces { OrphanGuard.cleanUp(ip: ["netns", "del", namespace]) }
        OrphanGuard.cleanUp(ip: ["link", "del", bridge])
        do {
            try NetworkNamespaces.run(["link", "add", bridge, "type", "bridge"])
            try NetworkNamespaces.run(["addr", "add", "\(hostAddress)/24", "dev", bridge])
            // Added second, so it is secondary: connections from the root namespace keep
            // `hostAddress` as their source.
            try NetworkNamespaces.run(["addr", "add", "\(secondHostAddress)/24", "dev", bridge])
            try NetworkNamespaces.run(["link", "set", bridge, "up"])
            for (index, namespace) in namespaces.enumerated() {
                let outside = "spv\(pid % 1_000_000)-\(index + 1)"
                try NetworkNamespaces.run(["netns", "add", namespace])
                try NetworkNamespaces.run(["link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", namespace])
                try NetworkNamespaces.run(["link", "set", outside, "master", bridge])
                try NetworkNamespaces.run(["link", "set", outside, "up"])
                try NetworkNamespaces.run(["-n", namespace, "addr", "add", "\(addresses[index])/24", "dev", "eth0"])
                try NetworkNamespaces.run(["-n", namespace, "link", "set", "eth0", "up"])
                try NetworkNamespaces.run(["-n", namespace, "link", "set", "lo", "up"])
            }
        } catch {
            remove()
            throw error
        }
    }

    deinit { remove() }

    /// Deletes what `init` made; each step is tried whatever the others did.
    public func remove() {
        guard !removed else { return }
        removed = true
        for namespace in namespaces { _ = try? NetworkNamespaces.run(["netns", "del", namespace]) }
        _ = try? NetworkNamespaces.run(["link", "del", bridge])
    }

    /// Namespace `index` loses every packet to `address` (a blackhole route: nothing
    /// answers, no reset, as when a network link dies) until `heal(_:from:)`.
    public func cut(_ index: Int, from address: String) throws {
        try NetworkNamespaces.run(["-n", namespaces[index], "route", "add", "blackhole", "\(address)/32"])
    }

    public func heal(_ index: Int, from address: String) throws {
        try NetworkNamespaces.run(["-n", namespaces[index], "route", "del", "blackhole", "\(address)/32"])
    }

    /// `ip netns exec NAMESPACE executable arguments…` as a child process: `ip` becomes the
    /// command, so the child's pid is the command's.
    public func start(in index: Int, _ executable: String, _ arguments: [String], name: String) throws -> ChildProcess {
        try ChildProcess(executable: NetworkNamespaces.ip, arguments: ["netns", "exec", namespaces[index], executable] + arguments, name: name)
    }

    static let ip = (["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"] as [String]).first { access($0, X_OK) == 0 } ?? "/usr/sbin/ip"

    /// Runs `ip ARGUMENTS`; its stdout, or a failure with its stderr.
    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        let result = try ChildProcess.run(executable: ip, arguments: arguments, seconds: 20)
        guard result.status == 0 else { throw ServiceError.failed("ip \(arguments.joined(separator: " ")): \(result.stderr)") }
        return result.stdout
    }
}
