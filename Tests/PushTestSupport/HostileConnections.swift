#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushSession
import PushWire

/// Raw TCP connections to a service on 127.0.0.1 from chosen 127.0.0.x source addresses,
/// doing what a hostile peer does: connect and stay silent, send part of a frame, trickle
/// bytes. Blocking sockets, each closed by `closeAll` or on deinit.
public final class HostileConnections {
    public let port: Int
    public private(set) var sockets: [Int32] = []
    /// The source address of each connection.
    public private(set) var sources: [String] = []

    public init(port: Int) { self.port = port }

    deinit { closeAll() }

    public var count: Int { sockets.count }

    /// Opens `count` connections from `source` (a 127.0.0.x address); their indices.
    /// The kernel completes each handshake into the listener's backlog, so this returns
    /// whether or not the service has accepted them yet.
    @discardableResult
    public func open(_ count: Int, from source: String) throws -> Range<Int> {
        let first = sockets.count
        sockets.reserveCapacity(first + count)
        for _ in 0..<count {
            let fd: Int32
            do {
                fd = try LoopbackSocket.connect(port: port, from: source, sendTimeoutMs: 10_000)
            } catch {
                throw ServiceError.failed("\(error.step) after \(sockets.count - first) connections: \(String(cString: strerror(error.code)))")
            }
            sockets.append(fd)
            sources.append(source)
        }
        return first..<sockets.count
    }

    /// Sends `bytes` on each connection; a connection the peer closed is skipped.
    public func send(_ bytes: [UInt8], to indices: some Sequence<Int>) {
        for index in indices where sockets[index] >= 0 {
            _ = bytes.withUnsafeBytes { Glibc.send(sockets[index], $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
    }

    /// The connections among `indices` whose peer has closed (end of stream or reset), now.
    public func closed(among indices: some Sequence<Int>, waitingMs: Int32 = 0) -> Set<Int> {
        let wanted = indices.filter { sockets[$0] >= 0 }
        var pollers = wanted.map { pollfd(fd: sockets[$0], events: HostileConnections.closeEvents, revents: 0) }
        guard !pollers.isEmpty else { return [] }
        _ = poll(&pollers, nfds_t(pollers.count), waitingMs)
        var result: Set<Int> = []
        for (offset, poller) in pollers.enumerated() where poller.revents & HostileConnections.closeEvents != 0 {
            result.insert(wanted[offset])
        }
        return result
    }

    /// Waits until every connection in `indices` has been closed by the peer; false if
    /// `timeoutMs` passes first.
    public func waitUntilClosed(_ indices: some Sequence<Int>, timeoutMs: Int64) -> Bool {
        let wanted = Set(indices)
        let deadline = Clocks.monotonicMilliseconds() + timeoutMs
        while true {
            let remaining = deadline - Clocks.monotonicMilliseconds()
            if closed(among: wanted, waitingMs: Int32(max(0, min(remaining, 50)))) == wanted { return true }
            if remaining <= 0 { return false }
        }
    }

    /// Sends `bytes` on each of `indices`, one byte per connection every `intervalMs`, until
    /// each has been closed by the peer or `timeoutMs` passes: a slowloris. The waits
    /// between bytes are waits for the close. Returns when each closed connection closed,
    /// in milliseconds from the call; a connection still open at the end is missing.
    public func trickle(_ bytes: [UInt8], on indices: [Int], intervalMs: Int32, timeoutMs: Int64) -> [Int: Int64] {
        let started = Clocks.monotonicMilliseconds()
        var closedAt: [Int: Int64] = [:]
        var offset = 0
        while Clocks.monotonicMilliseconds() - started < timeoutMs {
            var open = indices.filter { closedAt[$0] == nil }
            if open.isEmpty { break }
            if offset < bytes.count {
                send([bytes[offset]], to: open)
                offset += 1
            }
            let nextByteAt = Clocks.monotonicMilliseconds() + Int64(intervalMs)
            while !open.isEmpty, Clocks.monotonicMilliseconds() < nextByteAt {
                let waiting = Int32(max(1, nextByteAt - Clocks.monotonicMilliseconds()))
                let justClosed = closed(among: open, waitingMs: waiting)
                let now = Clocks.monotonicMilliseconds() - started
                for index in justClosed { closedAt[index] = now }
                open.removeAll { justClosed.contains($0) }
            }
        }
        return closedAt
    }

    /// The next message the peer sent on one connection, waiting up to `timeoutMs`; nil
    /// if none came (or the connection closed first).
    public func nextMessage(_ index: Int, timeoutMs: Int64 = 10_000) -> Message? {
        let deadline = Clocks.monotonicMilliseconds() + timeoutMs
        while true {
            if let message = takeBuffered(index) { return message }
            guard Clocks.monotonicMilliseconds() < deadline, readSome(index) else { return takeBuffered(index) }
        }
    }

    /// What the peer sent on one connection until it closed (waiting up to `timeoutMs`
    /// for the close), decoded, and whether it did close.
    public func messagesUntilClose(_ index: Int, timeoutMs: Int64 = 10_000) -> (messages: [Message], closed: Bool) {
        let deadline = Clocks.monotonicMilliseconds() + timeoutMs
        var messages: [Message] = []
        var closed = false
        while Clocks.monotonicMilliseconds() < deadline {
            while let message = takeBuffered(index) { messages.append(message) }
            if !readSome(index) {
                closed = ended.contains(index)
                if closed { break }
            }
        }
        while let message = takeBuffered(index) { messages.append(message) }
        return (messages, closed)
    }

    private var decoders: [Int: FrameDecoder] = [:]
    private var ended: Set<Int> = []

    private func takeBuffered(_ index: Int) -> Message? {
        guard var decoder = decoders[index] else { return nil }
        defer { decoders[index] = decoder }
        guard let frame = try? decoder.next() else { return nil }
        return try? Message.decode(frame)
    }

    /// Waits up to 50 ms for bytes and reads them into the connection's decoder; false
    /// when nothing came or the stream ended.
    private func readSome(_ index: Int) -> Bool {
        let fd = sockets[index]
        guard fd >= 0, !ended.contains(index) else { return false }
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 50) > 0 else { return false }
        var chunk = [UInt8](repeating: 0, count: 4096)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) {
            ended.insert(index)
            return false
        }
        guard count > 0 else { return false }
        decoders[index, default: FrameDecoder(maxFrame: FrameLimits.ceiling)].feed(Array(chunk[..<count]))
        return true
    }

    /// Closes the connections in `indices` (from this side).
    public func close(_ indices: some Sequence<Int>) {
        for index in indices where sockets[index] >= 0 {
            Glibc.close(sockets[index])
            sockets[index] = -1
        }
    }

    public func closeAll() { close(sockets.indices) }

    /// End of stream (POLLRDHUP), reset or error.
    static let closeEvents = Int16(0x2000) | Int16(POLLHUP) | Int16(POLLERR)
}

/// What /proc says about a process and the sockets of a port.
public enum ProcessProbe {
    /// VmRSS of `pid`, in bytes.
    public static func residentBytes(pid: pid_t) -> Int? {
        for line in readText("/proc/\(pid)/status").split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kib = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) }
            return kib.map { $0 * 1024 }
        }
        return nil
    }

    /// The open descriptors of `pid` numbered below `limit` (all of them when nil).
    public static func openDescriptors(pid: pid_t, below limit: Int? = nil) -> Int {
        guard let directory = opendir("/proc/\(pid)/fd") else { return -1 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let number = Int(name) else { continue }
            if limit.map({ number < $0 }) ?? true { count += 1 }
        }
        return count
    }

    /// Established sockets whose local port is `port` (the service's side), and how many
    /// of them hold bytes the service has not read yet (from /proc/net/tcp).
    public static func serverSockets(port: Int) -> (established: Int, unread: Int) {
        let portHex = hex4(port)
        var established = 0
        var unread = 0
        for line in readText("/proc/net/tcp").split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 4, fields[1].hasSuffix(":" + portHex), fields[3] == "01" else { continue }
            established += 1
            let queues = fields[4].split(separator: ":")
            if queues.count == 2, let rx = Int(queues[1], radix: 16), rx > 0 { unread += 1 }
        }
        return (established, unread)
    }

    static func readText(_ path: String) -> String {
        guard let file = fopen(path, "r") else { return "" }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Four upper-case hex digits, as /proc/net/tcp writes ports.
private func hex4(_ value: Int) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
