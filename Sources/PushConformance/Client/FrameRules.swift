import PushWire

/// Judgements of how a client writes frames, the same for devices and providers: made
/// from everything the harness's servers received in a case.
enum FrameRules {
    /// 2-5 and 2-6: the framer refuses a header with a flag or a reserved bit set.
    static func headers(_ h: ClientHarness) throws(CaseStop) -> String {
        for service in [HarnessService.gateway, .store] {
            if let error = h.log.unframed(service).first { throw .fail("the \(service) refused a frame: \(error)") }
        }
        return "\(h.log.received().count) frames, all with flags and reserved 0"
    }

    /// 3.4-1.
    static func fieldOrder(_ h: ClientHarness) throws(CaseStop) -> String {
        for frame in h.log.received() {
            guard let tags = FieldScan.tags(frame.body) else { throw .fail("a \(frame.name) body does not split into fields") }
            if let index = tags.indices.dropFirst().first(where: { tags[$0] <= tags[$0 - 1] }) {
                throw .fail("a \(frame.name) to the \(frame.service) has tag 0x\(String(tags[index], radix: 16)) after 0x\(String(tags[index - 1], radix: 16))")
            }
        }
        return "\(h.log.received().count) bodies in ascending tag order"
    }

    /// 3.1-4.
    static func fieldLengths(_ h: ClientHarness) throws(CaseStop) -> String {
        for frame in h.log.received() {
            guard let padded = FieldScan.paddedLength(frame.body) else { continue }
            throw .fail("a \(frame.name) to the \(frame.service) writes the length of field 0x\(String(padded, radix: 16)) in more bytes than it needs")
        }
        return "\(h.log.received().count) bodies, minimal lengths"
    }

    /// 5.1-1: HELLO first on every connection, and nothing after it until HELLO_OK, which
    /// the harness held back `heldMs`.
    static func helloFirst(_ h: ClientHarness, service: HarnessService, heldMs: Int64) throws(CaseStop) -> String {
        let connections = Set(h.log.received(from: service).map(\.connection)).sorted()
        guard !connections.isEmpty else { throw .fail("no frame reached the \(service)") }
        for connection in connections {
            let frames = h.log.received(from: service).filter { $0.connection == connection }
            guard frames[0].header.type == .hello else { throw .fail("the first frame to the \(service) was \(frames[0].name), not HELLO") }
            if let early = frames.dropFirst().first, early.atMs < frames[0].atMs + heldMs - 50 {
                throw .fail("a \(early.name) reached the \(service) \(early.atMs - frames[0].atMs) ms after HELLO, before HELLO_OK (held \(heldMs) ms)")
            }
        }
        return "HELLO first on \(connections.count) connection(s); nothing before HELLO_OK"
    }
}

extension WireLog.ReceivedFrame {
    /// The message type's name, or the raw type byte.
    var name: String { header.type.map { "\($0)" } ?? "frame of type 0x\(String(header.rawType, radix: 16))" }
}

/// Fields of a raw body, for the rules about how a sender writes them (3.1-4, 3.4-1).
enum FieldScan {
    /// The tags in order, or nil when the body does not split into fields.
    static func tags(_ body: [UInt8]) -> [UInt8]? {
        var tags: [UInt8] = []
        return walk(body) { tag, _, _ in tags.append(tag) } ? tags : nil
    }

    /// The tag of the first field whose length takes more varint bytes than it needs.
    static func paddedLength(_ body: [UInt8]) -> UInt8? {
        var padded: UInt8?
        _ = walk(body) { tag, length, lengthBytes in
            if padded == nil, lengthBytes > RawFrame.varint(length).count { padded = tag }
        }
        return padded
    }

    /// Calls `visit` with each field's tag, its length and the number of bytes the length
    /// took; false when the body runs short.
    static func walk(_ body: [UInt8], _ visit: (_ tag: UInt8, _ length: Int, _ lengthBytes: Int) -> Void) -> Bool {
        var index = 0
        while index < body.count {
            let tag = body[index]
            index += 1
            var length = 0, shift = 0, bytes = 0
            while true {
                guard index < body.count, bytes < 4 else { return false }
                let byte = body[index]
                index += 1
                bytes += 1
                length |= Int(byte & 0x7F) << shift
                shift += 7
                if byte & 0x80 == 0 { break }
            }
            guard index + length <= body.count else { return false }
            visit(tag, length, bytes)
            index += length
        }
        return true
    }
}

/// Requests outstanding on a connection, from the log: a request counts from its arrival
/// until the harness answered its correlation id.
enum Outstanding {
    /// Every request a client sends after HELLO but PING, which max_inflight exempts (5.3-4).
    static let counted: Set<MessageType> = [.fetch, .sync, .ack, .login, .store, .send, .recall, .status, .keys, .push]

    /// The most outstanding at once on any one connection to `service`.
    static func most(_ log: WireLog, service: HarnessService) -> Int {
        var outstanding: [Int: Set<UInt32>] = [:]
        var most = 0
        for event in log.events where event.service == service {
            switch event.kind {
            case .received(let header, _, _) where header.type.map(counted.contains) ?? false:
                outstanding[event.connection, default: []].insert(header.correlation)
                most = max(most, outstanding[event.connection]?.count ?? 0)
            case .sent(_, let correlation):
                outstanding[event.connection]?.remove(correlation)
            default:
                break
            }
        }
        return most
    }

    /// A sentence about the first request whose correlation id was still outstanding, or nil.
    static func reusedCorrelation(_ log: WireLog, service: HarnessService) -> String? {
        var outstanding: [Int: Set<UInt32>] = [:]
        for event in log.events where event.service == service {
            switch event.kind {
            case .received(let header, _, _) where header.type.map(counted.contains) ?? false:
                guard outstanding[event.connection, default: []].insert(header.correlation).inserted else {
                    return "a \(header.type.map { "\($0)" } ?? "request") reused correlation id \(header.correlation) while a request with it was outstanding"
                }
            case .sent(_, let correlation):
                outstanding[event.connection]?.remove(correlation)
            default:
                break
            }
        }
        return nil
    }
}
