import PushEventLoop
import PushProviderAPI
import PushWire

extension ProviderAPIProblem {
    /// What the HTTP server answers itself, as problem documents: a request evhttp cannot
    /// read (400), a body over the limit (413), an `Expect` other than 100-continue (417),
    /// a connection over the cap (503).
    static let errorPages = HTTPErrorPages(contentType: "application/problem+json") { status, _, detail in
        let problem = switch status {
        case 413: ProviderAPIProblem(413, Status.tooLarge.name, detail ?? "the request body is over the size limit")
        case 417: ProviderAPIProblem(417, Status.badRequest.name, detail ?? "the only expectation served is 100-continue")
        case 503: ProviderAPIProblem(503, Status.busy.name, "too many open connections, retry later")
        default: ProviderAPIProblem(status, Status.badRequest.name,
                                    detail ?? "not an HTTP/1.x request this server can read, or its head is over the size limit")
        }
        return problem.body
    }
}
