import PushClient

/// One HTTP GET to a service's monitoring endpoint on 127.0.0.1, for tests.
public struct HTTPGetResult: Sendable {
    public var status: Int
    public var headers: String
    public var body: String
}

public enum HTTPGet {
    /// GET `path` on 127.0.0.1:`port` and read the response until the server closes.
    public static func fetch(port: Int, path: String) throws -> HTTPGetResult {
        let client = try BlockingWireClient(host: "127.0.0.1", port: port)
        try client.sendRaw(Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        let response = client.readAll()
        guard let end = response.range(of: "\r\n\r\n") else { throw ServiceError.failed("no HTTP response head: \(response)") }
        let head = String(response[..<end.lowerBound])
        let statusField = head.split(separator: " ", maxSplits: 2).dropFirst().first
        guard let statusField, let status = Int(statusField) else { throw ServiceError.failed("bad status line: \(head)") }
        return HTTPGetResult(status: status, headers: head, body: String(response[end.upperBound...]))
    }

    /// The body of GET /metrics, which must answer 200.
    public static func metrics(port: Int) throws -> String {
        let result = try fetch(port: port, path: "/metrics")
        guard result.status == 200 else { throw ServiceError.failed("GET /metrics: \(result.status)") }
        return result.body
    }
}
