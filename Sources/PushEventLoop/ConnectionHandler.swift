import PushWire

/// What a connection's owner wants done when its output buffer goes over the cap.
public enum BackpressureAction: Sendable {
    /// Cut the peer off now: the connection closes with `.slowConsumer`.
    case close
    /// Keep the connection; the owner stops producing (and usually pauses reading)
    /// until `onOutputDrained`. Memory is then bounded only by what the owner writes.
    case keepOpen
}

/// The owner of a connection: a session object on a server, a client's protocol state.
///
/// One strong reference per connection and no per-connection closure contexts; the
/// connection drops the reference after `onClose`, which breaks the usual
/// session <-> connection cycle. All calls happen on the connection's loop thread.
public protocol ConnectionHandler: AnyObject {
    /// A whole frame. `body` points into the connection's input buffer and is valid
    /// only for the duration of the call; copy out what must outlive it.
    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer)

    /// With `connection.isFramed` off: the bytes of one read, as they arrived, for
    /// protocols that are not made of frames (HTTP). `bytes` points into the loop's read
    /// buffer and is valid only for the duration of the call. Default: ignores them.
    func onBytes(_ connection: Connection, bytes: UnsafeRawBufferPointer)

    /// The peer sent a header that cannot be trusted (bad magic, version, reserved
    /// bits, or a length over `maxFrame`). Reading has already stopped and no byte of
    /// the body was read. Typical owner: write GOAWAY, then `closeAfterFlush`.
    /// Default: close at once with `.framingError`.
    func onFramingError(_ connection: Connection, error: WireError)

    /// A write left more than `maxOutputBytes` queued. Called after every such write.
    /// Default: `.close`.
    func onBackpressure(_ connection: Connection) -> BackpressureAction

    /// After `onBackpressure` returned `.keepOpen`: the queued output fell to half the cap.
    func onOutputDrained(_ connection: Connection)

    /// Exactly once, after the socket is closed. Writes are no longer possible.
    func onClose(_ connection: Connection, reason: CloseReason)
}

extension ConnectionHandler {
    public func onBytes(_ connection: Connection, bytes: UnsafeRawBufferPointer) {}

    public func onFramingError(_ connection: Connection, error: WireError) {
        connection.close(reason: .framingError(error))
    }

    public func onBackpressure(_ connection: Connection) -> BackpressureAction { .close }

    public func onOutputDrained(_ connection: Connection) {}

    public func onClose(_ connection: Connection, reason: CloseReason) {}
}

/// Closure-based handler for small owners and tests: `connection.callbacks.frame = { ... }`.
/// Each closure that captures state costs an allocation per connection, so servers with
/// many connections should implement `ConnectionHandler` on their session type instead.
public final class ConnectionCallbacks: ConnectionHandler {
    public var frame: ((Connection, FrameHeader, UnsafeRawBufferPointer) -> Void)?
    public var framingError: ((Connection, WireError) -> Void)?
    public var backpressure: ((Connection) -> BackpressureAction)?
    public var outputDrained: ((Connection) -> Void)?
    public var close: ((Connection, CloseReason) -> Void)?

    public init() {}

    public func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        frame?(connection, header, body)
    }

    public func onFramingError(_ connection: Connection, error: WireError) {
        if let framingError {
            framingError(connection, error)
        } else {
            connection.close(reason: .framingError(error))
        }
    }

    public func onBackpressure(_ connection: Connection) -> BackpressureAction {
        backpressure?(connection) ?? .close
    }

    public func onOutputDrained(_ connection: Connection) { outputDrained?(connection) }

    public func onClose(_ connection: Connection, reason: CloseReason) { close?(connection, reason) }
}

extension Connection {
    /// The connection's closure handler, installed on first use (replacing any other
    /// handler). Only while the connection is open: a closed one gets a detached object.
    public var callbacks: ConnectionCallbacks {
        if let existing = handler as? ConnectionCallbacks { return existing }
        let created = ConnectionCallbacks()
        if isOpen { handler = created }
        return created
    }
}
