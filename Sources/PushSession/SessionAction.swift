import PushWire

/// What the I/O layer is to do after an event. One value per event, so the hot path
/// allocates nothing for it.
public enum SessionAction: Equatable {
    case none
    /// Write this frame; the connection stays open (PONG, PING, an ERROR reply).
    case send(Message, correlation: UInt32)
    /// Write this frame, stop reading, and close once it is flushed (an ERROR refusing
    /// HELLO, a GOAWAY for a fatal fault).
    case sendAndClose(Message, correlation: UInt32)
    /// Close at once, writing nothing more (the peer said GOAWAY).
    case close
    /// Server: a request for the service. It holds a max_inflight slot until the
    /// service answers it through `answered(now:)`.
    case serve(Message, correlation: UInt32)
    /// A reply or one-way message for the owner: DELIVERY_ACK at a server; at a client
    /// the replies to its requests (ERROR included), PUSH and MISSED.
    case deliver(Message, correlation: UInt32)
    /// Client: a reply the client could not decode; its request fails ([5.6-3]).
    case malformedReply(correlation: UInt32, WireError)
    /// Server: HELLO passed negotiation. The service checks the credential and calls
    /// `admit` or `refuse`.
    case checkCredential(Hello, correlation: UInt32)
    /// Client: HELLO_OK arrived; the limits in it are in force.
    case ready(HelloOK)
    /// Client: the server refused the handshake (ERROR or GOAWAY); the connection closes.
    case refused(Status, String?)
    /// Client: GOAWAY after the handshake. Requests above `last_correlation` were not
    /// carried out ([5.5-2]); with `close` the connection is to be closed now, otherwise
    /// (SHUTTING_DOWN) the replies up to `last_correlation` are still coming.
    case goaway(Goaway, close: Bool)
}
