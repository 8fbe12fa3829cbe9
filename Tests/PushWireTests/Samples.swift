import PushWire

/// One or more instances of every message type, with optional fields both set and unset.
enum Samples {
    static let id = PayloadID(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
    static let token: [UInt8] = Array(0..<80)

    static let all: [Message] = [
        .hello(Hello(role: .device)),
        .hello(Hello(role: .provider, versionMin: 1, versionMax: 3, credential: Array(repeating: 7, count: 300),
                     maxFrame: 1 << 20, keepaliveMs: 15_000, maxInflight: 64, name: "bench-ü")),
        .helloOK(HelloOK(maxFrame: 65_536, keepaliveMs: 30_000, maxInflight: 1024)),
        .helloOK(HelloOK(version: 1, maxFrame: 1024, keepaliveMs: 0, maxInflight: 1, name: "store-1")),
        .ping,
        .pong,
        .goaway(Goaway(status: .shuttingDown, lastCorrelation: 41)),
        .goaway(Goaway(status: .malformedFrame, lastCorrelation: 0, message: "bad magic byte 0x47")),
        .error(ErrorReply(status: .notFound)),
        .error(ErrorReply(status: .badRequest, message: "missing required field user")),
        .login(Login(user: "alice", password: Array("correct horse".utf8), deviceID: "phone-1")),
        .loginOK(LoginOK(token: token, expiresAt: 1_800_000_000_000)),
        .store(StoreRequest(user: "alice", payload: Array("hi".utf8))),
        .store(StoreRequest(user: "bob", payload: Array(repeating: 0xAB, count: 4096), ttlSeconds: 60, readLimit: 1)),
        .storeOK(StoreOK(id: id, expiresAt: 42)),
        .fetch(Fetch(id: id, token: token)),
        .fetch(Fetch(id: id, token: nil)),
        .fetchOK(FetchOK(id: id, payload: [], createdAt: 1, expiresAt: 2)),
        .fetchOK(FetchOK(id: id, payload: Array("secret".utf8), createdAt: 1_700_000_000_000, expiresAt: 1_700_086_400_000)),
        .sync(Sync(token: token)),
        .sync(Sync(token: nil, cursor: 99, limit: 1000)),
        .syncOK(SyncOK(ids: [], cursor: 0, hasMore: false)),
        .syncOK(SyncOK(ids: [id, PayloadID(high: 1, low: 2)], cursor: 7, hasMore: true)),
        .ack(Ack(id: id, token: token)),
        .ack(Ack(id: id, token: nil)),
        .ackOK(AckOK(id: id)),
        .recall(Recall(id: id)),
        .recallOK(RecallOK(id: id)),
        .status(StatusRequest(id: id)),
        .statusOK(StatusOK(id: id, state: .fetched, fetchCount: 3, fetchedAt: 5, createdAt: 4, expiresAt: 6)),
        .push(Push(target: .user("alice"), id: id.bytes)),
        .push(Push(target: .tag("news"), id: Array(repeating: 1, count: 64), alert: true, priority: 10,
                   collapseKey: "score", ttlSeconds: 30)),
        .push(Push(target: .device("phone-1"), id: [9], priority: 0)),
        .push(Push(target: nil, id: id.bytes, alert: true)),
        .pushAck(PushAck(written: 3, queued: 1)),
        .deliveryAck(DeliveryAck(id: id.bytes)),
        .missed(Missed(missedCount: 17)),
    ]
}
