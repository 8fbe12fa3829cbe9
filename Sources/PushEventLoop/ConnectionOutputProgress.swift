import Glibc

/// How far the peer has taken a connection's output, for telling a peer that has stopped
/// reading from one that is only slow: bytes written and not taken yet, and a running count
/// of bytes taken that moves whenever the peer's side takes any.
public struct OutputProgress: Equatable, Sendable {
    /// Queued in the transport, plus those in the socket's send queue that the peer's TCP
    /// has not acknowledged (ciphertext under TLS): the output a peer that stopped reading
    /// leaves behind once its receive buffer is full.
    public var notTaken: Int
    /// Bytes of this connection the peer's TCP has acknowledged since it opened; 0 (not
    /// asked) when nothing waits.
    public var taken: UInt64

    public init(notTaken: Int, taken: UInt64) {
        self.notTaken = notTaken
        self.taken = taken
    }
}

extension Connection {
    /// Asks the kernel (one system call, two when bytes wait): for a periodic check of the
    /// few connections that have left frames unanswered, not for every write. Nil when
    /// closed or not TCP.
    public var outputProgress: OutputProgress? {
        guard phase != .closed else { return nil }
        let fd = transport.fd
        guard fd >= 0 else { return nil }
        var unacknowledged: Int32 = 0
        let asked = withUnsafeMutablePointer(to: &unacknowledged) { ioctl(fd, Connection.sendQueueRequest, UnsafeMutableRawPointer($0)) }
        let notTaken = transport.outputBufferedBytes + (asked == 0 ? Int(max(0, unacknowledged)) : 0)
        guard notTaken > 0 else { return OutputProgress(notTaken: 0, taken: 0) }
        guard let taken = Connection.bytesAcknowledged(fd) else { return nil }
        return OutputProgress(notTaken: notTaken, taken: taken)
    }

    /// SIOCOUTQ (TIOCOUTQ): for TCP, the bytes written to the socket and not yet
    /// acknowledged by the peer, sent or not.
    private static let sendQueueRequest = UInt(0x5411)

    /// `tcpi_bytes_acked` of Linux's `struct tcp_info` (since Linux 4.1), the 64-bit count at
    /// byte 120: glibc's copy of the struct ends before it, so the kernel's layout is read.
    private static func bytesAcknowledged(_ fd: Int32) -> UInt64? {
        withUnsafeTemporaryAllocation(byteCount: 256, alignment: 8) { buffer -> UInt64? in
            var length = socklen_t(buffer.count)
            guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, buffer.baseAddress, &length) == 0, length >= 128 else { return nil }
            return buffer.load(fromByteOffset: 120, as: UInt64.self)
        }
    }
}
