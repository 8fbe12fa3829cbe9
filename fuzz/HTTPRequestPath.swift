import PushProviderAPI
import PushWire

// libFuzzer target over the HTTP provider API's request path, as the store drives it: the
// input is a connection's bytes, read as HTTP/1.x requests one after another (keep-alive)
// by the rules evhttp applies (HTTPServer.swift), each request's head checked, routed
// (`ProviderAPIRoute`), and turned into the protocol request the store would run
// (`ProviderAPIRequest`: the JSON body, its member rules, the SEND's wire limits). Every
// refusal must be a problem document; every request must be one the wire carries.
//
// Input: the stream. The parse stops, like evhttp's connection, at the first head it
// cannot read or the first body that is not there whole.

/// evhttp's limits as the store sets them (HTTPServerLimits' defaults; the body limit of
/// the default payload limit).
let maxHeadBytes = 8 * 1024
let maxBodyBytes = 256 * 1024

struct Head {
    var method: String
    var path: String
    var headers: [(name: String, value: String)]

    func values(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return headers.filter { $0.name.lowercased() == wanted }.map(\.value)
    }
}

/// One line up to LF (a CR before it dropped), or nil when the input ends first.
func line(_ input: ArraySlice<UInt8>, from start: inout Int) -> String? {
    guard let newline = input[start...].firstIndex(of: 0x0A) else { return nil }
    var end = newline
    if end > start, input[end - 1] == 0x0D { end -= 1 }
    let text = String(decoding: input[start..<end], as: UTF8.self)
    start = newline + 1
    return text
}

/// A request head the way evhttp reads one: `METHOD SP TARGET SP HTTP/1.x`, then header
/// lines (leading spaces cut from values, trailing spaces and tabs too, folded lines
/// appended) up to an empty line. nil where evhttp answers 400 or waits for more.
func parseHead(_ input: ArraySlice<UInt8>, from start: inout Int) -> Head? {
    let headStart = start
    guard let requestLine = line(input, from: &start) else { return nil }
    let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
    guard parts.count == 3, !parts[0].isEmpty, parts[2].hasPrefix("HTTP/1.") else { return nil }
    var target = Substring(parts[1])
    if target.hasPrefix("http://") || target.hasPrefix("https://") {
        let afterScheme = target.drop(while: { $0 != "/" }).dropFirst(2)
        target = afterScheme.firstIndex(of: "/").map { afterScheme[$0...] } ?? "/"
    }
    let path = String(target.prefix(while: { $0 != "?" && $0 != "#" }))
    var headers: [(name: String, value: String)] = []
    while true {
        guard start - headStart <= maxHeadBytes, let text = line(input, from: &start) else { return nil }
        if text.isEmpty { break }
        if text.first == " " || text.first == "\t" {
            guard !headers.isEmpty else { return nil }
            headers[headers.count - 1].value += " " + trimmed(Substring(text))
            continue
        }
        guard let colon = text.firstIndex(of: ":") else { return nil }
        headers.append((String(text[..<colon]), trimmed(text[text.index(after: colon)...])))
    }
    return Head(method: String(parts[0]), path: path, headers: headers)
}

func trimmed(_ text: Substring) -> String {
    String(text.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
}

/// What the store does with one request up to running it: the problem it answers, or the
/// protocol request, which must survive the wire.
func serve(_ head: Head, body: [UInt8]) {
    do throws(ProviderAPIProblem) {
        let route = try ProviderAPIRoute.of(method: head.method, path: head.path)
        let message = try ProviderAPIRequest.message(for: route, header: head.values, body: body)
        let frame = message.encoded(correlation: 1)
        var decoder = FrameDecoder(maxFrame: FrameLimits.ceiling)
        decoder.feed(frame)
        guard let decoded = try? decoder.next(), let again = try? Message.decode(decoded) else {
            preconditionFailure("the \(message.type) an HTTP request stands for does not decode")
        }
        precondition(again == message, "the \(message.type) an HTTP request stands for changed on the wire")
        // The keys' answer reads If-None-Match from the request: 304 or 200, whatever it holds.
        if case .keys = route {
            let answer = ProviderAPIResponse.answering(.keysOK(KeysOK(cursor: 42, keys: [])), to: route, createdAt: nil,
                                                       ifNoneMatch: head.values("If-None-Match"))
            precondition(answer.status == 304 || answer.status == 200, "the keys answered \(answer.status)")
        }
    } catch {
        check(error)
    }
}

func check(_ problem: ProviderAPIProblem) {
    precondition((400...599).contains(problem.httpStatus), "a problem answered \(problem.httpStatus)")
    precondition(!problem.body.isEmpty && Status.all.contains { $0.name == problem.code }, "a problem without its document or code")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPRequestPath(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))[...]
    var at = input.startIndex
    while at < input.endIndex {
        let headStart = at
        guard let head = parseHead(input, from: &at) else { break }
        // The HTTP server's own head rules (HTTPRequestHead.swift, compiled into this
        // target): a head they refuse is answered 400 and its connection closed, so nothing
        // after it is read as a request. A head they pass has at most one Content-Length.
        guard HTTPRequestHead.check(input[headStart..<at]) == .passes else { break }
        precondition(head.values("Content-Length").count <= 1, "a head with two Content-Lengths passed")
        let lengths = head.values("Content-Length")
        var body: [UInt8] = []
        if let text = lengths.first {
            guard let length = Int(text), length >= 0, length <= maxBodyBytes, input.endIndex - at >= length else { break }
            body = Array(input[at..<(at + length)])
            at += length
        } else if head.values("Transfer-Encoding").contains(where: { $0.lowercased().contains("chunked") }) {
            break  // chunked bodies: evhttp joins them before the handler sees one; not modelled
        }
        serve(head, body: body)
    }
    return 0
}
