/// Any message of protocol v1, decoded.
public enum Message: Equatable, Sendable {
    case hello(Hello)
    case helloOK(HelloOK)
    case ping
    case pong
    case goaway(Goaway)
    case error(ErrorReply)
    case login(Login)
    case loginOK(LoginOK)
    case store(StoreRequest)
    case storeOK(StoreOK)
    case fetch(Fetch)
    case fetchOK(FetchOK)
    case sync(Sync)
    case syncOK(SyncOK)
    case ack(Ack)
    case ackOK(AckOK)
    case recall(Recall)
    case recallOK(RecallOK)
    case status(StatusRequest)
    case statusOK(StatusOK)
    case keys(Keys)
    case keysOK(KeysOK)
    case push(Push)
    case pushAck(PushAck)
    case deliveryAck(DeliveryAck)
    case missed(Missed)
    case registry(RegistryRequest)
    case registryOK(RegistryOK)
    case send(SendRequest)
    case sendOK(SendOK)

    public var type: MessageType {
        switch self {
        case .hello: .hello
        case .helloOK: .helloOK
        case .ping: .ping
        case .pong: .pong
        case .goaway: .goaway
        case .error: .error
        case .login: .login
        case .loginOK: .loginOK
        case .store: .store
        case .storeOK: .storeOK
        case .fetch: .fetch
        case .fetchOK: .fetchOK
        case .sync: .sync
        case .syncOK: .syncOK
        case .ack: .ack
        case .ackOK: .ackOK
        case .recall: .recall
        case .recallOK: .recallOK
        case .status: .status
        case .statusOK: .statusOK
        case .keys: .keys
        case .keysOK: .keysOK
        case .push: .push
        case .pushAck: .pushAck
        case .deliveryAck: .deliveryAck
        case .missed: .missed
        case .registry: .registry
        case .registryOK: .registryOK
        case .send: .send
        case .sendOK: .sendOK
        }
    }

    /// The status the header carries: a failure for ERROR and GOAWAY, OK for the rest.
    public var status: Status {
        switch self {
        case .goaway(let goaway): goaway.status
        case .error(let error): error.status
        default: .ok
        }
    }

    /// The message's body as its WireMessage value.
    public var body: any WireMessage {
        switch self {
        case .hello(let m): m
        case .helloOK(let m): m
        case .ping: Ping()
        case .pong: Pong()
        case .goaway(let m): m
        case .error(let m): m
        case .login(let m): m
        case .loginOK(let m): m
        case .store(let m): m
        case .storeOK(let m): m
        case .fetch(let m): m
        case .fetchOK(let m): m
        case .sync(let m): m
        case .syncOK(let m): m
        case .ack(let m): m
        case .ackOK(let m): m
        case .recall(let m): m
        case .recallOK(let m): m
        case .status(let m): m
        case .statusOK(let m): m
        case .keys(let m): m
        case .keysOK(let m): m
        case .push(let m): m
        case .pushAck(let m): m
        case .deliveryAck(let m): m
        case .missed(let m): m
        case .registry(let m): m
        case .registryOK(let m): m
        case .send(let m): m
        case .sendOK(let m): m
        }
    }

    /// Decodes the body of a frame whose header has been parsed and validated.
    ///
    /// Every error here is a request error: the frame was delimited, so the connection
    /// can answer ERROR and go on ([5.6-2]).
    public static func decode(header: FrameHeader, body: UnsafeRawBufferPointer) throws(WireError) -> Message {
        guard let type = header.type else { throw .unknownType(header.rawType) }
        switch type {
        case .goaway:
            var goaway = try Goaway(body: body)
            goaway.status = header.status
            return .goaway(goaway)
        case .error:
            var error = try ErrorReply(body: body)
            error.status = header.status
            return .error(error)
        default:
            guard header.status == .ok else { throw .nonzeroStatusInRequest }
        }
        switch type {
        case .hello: return .hello(try Hello(body: body))
        case .helloOK: return .helloOK(try HelloOK(body: body))
        case .ping: _ = try Ping(body: body); return .ping
        case .pong: _ = try Pong(body: body); return .pong
        case .login: return .login(try Login(body: body))
        case .loginOK: return .loginOK(try LoginOK(body: body))
        case .store: return .store(try StoreRequest(body: body))
        case .storeOK: return .storeOK(try StoreOK(body: body))
        case .fetch: return .fetch(try Fetch(body: body))
        case .fetchOK: return .fetchOK(try FetchOK(body: body))
        case .sync: return .sync(try Sync(body: body))
        case .syncOK: return .syncOK(try SyncOK(body: body))
        case .ack: return .ack(try Ack(body: body))
        case .ackOK: return .ackOK(try AckOK(body: body))
        case .recall: return .recall(try Recall(body: body))
        case .recallOK: return .recallOK(try RecallOK(body: body))
        case .status: return .status(try StatusRequest(body: body))
        case .statusOK: return .statusOK(try StatusOK(body: body))
        case .keys: return .keys(try Keys(body: body))
        case .keysOK: return .keysOK(try KeysOK(body: body))
        case .push: return .push(try Push(body: body))
        case .pushAck: return .pushAck(try PushAck(body: body))
        case .deliveryAck: return .deliveryAck(try DeliveryAck(body: body))
        case .missed: return .missed(try Missed(body: body))
        case .registry: return .registry(try RegistryRequest(body: body))
        case .registryOK: return .registryOK(try RegistryOK(body: body))
        case .send: return .send(try SendRequest(body: body))
        case .sendOK: return .sendOK(try SendOK(body: body))
        case .goaway, .error: preconditionFailure("handled above")
        }
    }

    public static func decode(_ frame: Frame) throws(WireError) -> Message {
        let result = frame.body.withUnsafeBytes { body in
            Result { () throws(WireError) -> Message in try decode(header: frame.header, body: body) }
        }
        return try result.get()
    }

    /// Appends the whole frame, header and body, to `out`.
    public func encode(correlation: UInt32, into out: inout [UInt8]) {
        let headerStart = out.count
        FrameHeader(type: type, correlation: correlation, status: status).write(into: &out)
        // Lend `out`'s storage to the writer and take it back, so nothing is copied.
        var writer = FieldWriter()
        swap(&writer.bytes, &out)
        writeFields(to: &writer)
        swap(&writer.bytes, &out)
        let length = UInt32(out.count - headerStart - FrameHeader.size)
        let lengthOffset = headerStart + 12
        out[lengthOffset] = UInt8(truncatingIfNeeded: length >> 24)
        out[lengthOffset + 1] = UInt8(truncatingIfNeeded: length >> 16)
        out[lengthOffset + 2] = UInt8(truncatingIfNeeded: length >> 8)
        out[lengthOffset + 3] = UInt8(truncatingIfNeeded: length)
    }

    /// Switches over the concrete types rather than going through `body`: an existential
    /// of a large struct is boxed on the heap, and this runs for every frame sent.
    private func writeFields(to writer: inout FieldWriter) {
        switch self {
        case .hello(let m): m.writeFields(to: &writer)
        case .helloOK(let m): m.writeFields(to: &writer)
        case .ping: break
        case .pong: break
        case .goaway(let m): m.writeFields(to: &writer)
        case .error(let m): m.writeFields(to: &writer)
        case .login(let m): m.writeFields(to: &writer)
        case .loginOK(let m): m.writeFields(to: &writer)
        case .store(let m): m.writeFields(to: &writer)
        case .storeOK(let m): m.writeFields(to: &writer)
        case .fetch(let m): m.writeFields(to: &writer)
        case .fetchOK(let m): m.writeFields(to: &writer)
        case .sync(let m): m.writeFields(to: &writer)
        case .syncOK(let m): m.writeFields(to: &writer)
        case .ack(let m): m.writeFields(to: &writer)
        case .ackOK(let m): m.writeFields(to: &writer)
        case .recall(let m): m.writeFields(to: &writer)
        case .recallOK(let m): m.writeFields(to: &writer)
        case .status(let m): m.writeFields(to: &writer)
        case .statusOK(let m): m.writeFields(to: &writer)
        case .keys(let m): m.writeFields(to: &writer)
        case .keysOK(let m): m.writeFields(to: &writer)
        case .push(let m): m.writeFields(to: &writer)
        case .pushAck(let m): m.writeFields(to: &writer)
        case .deliveryAck(let m): m.writeFields(to: &writer)
        case .missed(let m): m.writeFields(to: &writer)
        case .registry(let m): m.writeFields(to: &writer)
        case .registryOK(let m): m.writeFields(to: &writer)
        case .send(let m): m.writeFields(to: &writer)
        case .sendOK(let m): m.writeFields(to: &writer)
        }
    }

    public func encoded(correlation: UInt32) -> [UInt8] {
        var out = [UInt8]()
        encode(correlation: correlation, into: &out)
        return out
    }
}

/// A delimited frame: its header and a copy of its body.
public struct Frame: Equatable, Sendable {
    public var header: FrameHeader
    public var body: [UInt8]

    public init(header: FrameHeader, body: [UInt8]) {
        self.header = header
        self.body = body
    }

    public var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(header.frameLength)
        header.write(into: &out)
        out.append(contentsOf: body)
        return out
    }
}
