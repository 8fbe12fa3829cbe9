import PushClock
import PushEventLoop
import PushSecurity
import PushSession
import PushWire

/// Before the first case: is a securepush service listening at each address given? One
/// HELLO settles it. Any well-formed frame in answer (HELLO_OK, or an ERROR refusing the
/// credential) means yes; anything else ends the run at once with one sentence saying
/// what answered, instead of every case failing on its own timeout.
enum ServiceProbe {
    /// Why the run cannot go on, or nil when every service given speaks the protocol.
    static func problem(_ options: ConformanceOptions, run: RunState) -> String? {
        if let store = options.store,
           let problem = check(store, flag: "--store", service: "store", hello: storeHello(), options, run: run) {
            return problem
        }
        if let gateway = options.gateway,
           let problem = check(gateway, flag: "--gateway", service: "gateway", hello: gatewayHello(options), options, run: run) {
            return problem
        }
        return nil
    }

    static func storeHello() -> Hello { CaseContext.hello(.device) }

    /// A provider with the deployment's key when the run has it (so the gateway logs no
    /// failed login), else a device without a registration, which a gateway refuses with ERROR.
    static func gatewayHello(_ options: ConformanceOptions) -> Hello {
        guard let keys = options.keys else { return CaseContext.hello(.device) }
        let credential = HelloCredential.provider(keys.providerKey).make(for: .gateway, nowMs: Clocks.wallMilliseconds())
        return CaseContext.hello(.provider, credential: credential)
    }

    static func check(_ endpoint: HostPort, flag: String, service: String, hello: Hello, _ options: ConformanceOptions,
                      run: RunState) -> String? {
        let channel: ProbeConnection
        let helloBytes = Message.hello(hello).encoded(correlation: 1)
        do {
            if let tls = options.tls {
                let secure = try LoopWireChannel.connect(endpoint, tls: tls, timeoutMs: options.timeoutMs, loop: try run.loop())
                try? secure.sendRaw(helloBytes)
                channel = secure
            } else {
                let plain = try PlainProbeSocket(endpoint, timeoutMs: options.timeoutMs)
                plain.sendRaw(helloBytes)
                channel = plain
            }
        } catch {
            let what = options.tls == nil ? "cannot reach" : "cannot open a TLS connection to"
            return "\(what) the \(service) at \(endpoint) (\(flag)): \(error)" + (error.refused ? "; is it running?" : "")
        }
        channel.awaitBytes(FrameHeader.size, timeoutMs: options.timeoutMs)
        // The whole of a short answer, to read a refusal's text.
        // Parsed only once a whole header is in: a peer may send fewer bytes and stop.
        if channel.firstBytes.count >= FrameHeader.size,
           let header = channel.firstBytes.prefix(FrameHeader.size).withUnsafeBytes({ try? FrameHeader.parse($0, maxFrame: FrameLimits.ceiling) }),
           header.frameLength <= LoopWireChannel.keptBytes {
            channel.awaitBytes(header.frameLength, timeoutMs: options.timeoutMs)
        }
        guard let detail = verdict(channel.firstBytes, closed: channel.peerClosed, waitedMs: options.timeoutMs,
                                   overTLS: options.tls != nil) else { return nil }
        return "\(endpoint) (\(flag)) does not speak the securepush protocol: \(detail)"
    }

    /// What is wrong with `bytes` as the answer to HELLO, or nil when they start with a
    /// valid frame header.
    static func verdict(_ bytes: [UInt8], closed: Bool, waitedMs: Int32, overTLS: Bool) -> String? {
        if bytes.count >= FrameHeader.size {
            let header = bytes.prefix(FrameHeader.size).withUnsafeBytes { raw in
                try? FrameHeader.parse(raw, maxFrame: FrameLimits.ceiling)
            }
            if let header {
                if !overTLS, saysItServesTLS(bytes, header: header) {
                    return "it serves TLS, so pass --ca-file"
                }
                return nil
            }
        }
        guard !bytes.isEmpty else {
            // A TLS server reads a plain HELLO as the start of a long record and waits.
            let hint = overTLS ? "" : " (if it serves TLS, pass --ca-file)"
            return (closed ? "it closed the connection without answering HELLO" : "no answer to HELLO within \(waitedMs) ms") + hint
        }
        if bytes[0] == FrameHeader.magic, bytes.count < FrameHeader.size {
            return "it sent \(bytes.count) bytes of a frame header and " + (closed ? "closed the connection" : "then nothing for \(waitedMs) ms")
        }
        if !overTLS, bytes.count >= 2, bytes[0] == 0x15 || bytes[0] == 0x16, bytes[1] == 0x03 {
            return "it answered HELLO with a TLS record: it serves TLS, so pass --ca-file"
        }
        if let line = printableFirstLine(bytes) { return "it answered HELLO with \"\(line)\"" }
        let hex = bytes.prefix(16).map { byte in
            let digits = String(byte, radix: 16)
            return byte < 16 ? "0" + digits : digits
        }
        return "it answered HELLO with bytes that are no securepush frame: " + hex.joined(separator: " ") + (bytes.count > 16 ? " ..." : "")
    }

    /// Whether the answer is the plain GOAWAY a securepush TLS listener sends a client that
    /// did not start TLS.
    static func saysItServesTLS(_ bytes: [UInt8], header: FrameHeader) -> Bool {
        guard bytes.count >= header.frameLength else { return false }
        let message = bytes[FrameHeader.size..<header.frameLength].withUnsafeBytes { body in
            try? Message.decode(header: header, body: body)
        }
        switch message {
        case .goaway(let goaway)?: return goaway.message == TLSContext.plainClientNotice
        case .error(let error)?: return error.message == TLSContext.plainClientNotice
        default: return false
        }
    }

    /// The first line of a text answer (an HTTP status line, a banner), or nil for binary.
    static func printableFirstLine(_ bytes: [UInt8]) -> String? {
        let text = bytes.prefix { $0 != 0x0A && $0 != 0x0D }
        guard text.count >= 4, text.allSatisfy({ (0x20...0x7E).contains($0) || $0 == 0x09 }) else { return nil }
        let line = String(decoding: text, as: UTF8.self)
        return line.count > 60 ? String(line.prefix(60)) + "..." : line
    }
}
