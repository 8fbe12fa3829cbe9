import PushEventLoop
import PushSecurity

/// The addresses of one service, in the order a client tries them: what `--store` takes
/// as `HOST:PORT,HOST:PORT` (an IPv6 host in brackets). Several store processes over one
/// database each serve every request, so a client that loses one moves to the next.
/// Never empty.
public struct AddressList: Sendable, Hashable, CustomStringConvertible {
    public let addresses: [HostPort]

    public init(_ first: HostPort, _ rest: [HostPort] = []) {
        addresses = [first] + rest
    }

    /// Nil for an empty list.
    public init?(_ addresses: [HostPort]) {
        guard let first = addresses.first else { return nil }
        self.init(first, Array(addresses.dropFirst()))
    }

    /// Parses `HOST:PORT,HOST:PORT`; spaces around an element are ignored. Every element is
    /// checked by its syntax alone (no lookup), and a port of 0, which only a listener may
    /// use, is refused.
    public init(parsing text: String) throws(AddressListError) {
        let elements = text.split(separator: ",", omittingEmptySubsequences: false)
        var parsed: [HostPort] = []
        for (index, raw) in elements.enumerated() {
            let element = raw.trimmingSpaces
            let position = index + 1
            func bad(_ reason: String, portIsZero: Bool = false) -> AddressListError {
                AddressListError(text: text, element: element, position: position, count: elements.count, reason: reason,
                                 portIsZero: portIsZero)
            }
            guard !element.isEmpty else { throw bad("an empty address") }
            if let problem = ConfigSchema.addressProblem(element) { throw bad(problem) }
            guard let address = HostPort(parsing: element) else { throw bad("not HOST:PORT") }
            guard address.port != 0 else { throw bad("port 0 is for listening; give the service's port", portIsZero: true) }
            parsed.append(address)
        }
        // `split` yields at least one element, so `parsed` is not empty here.
        guard let list = AddressList(parsed) else {
            throw AddressListError(text: text, element: "", position: 1, count: 1, reason: "no address", portIsZero: false)
        }
        self = list
    }

    public var first: HostPort { addresses[0] }
    public var count: Int { addresses.count }

    /// As it is written on the command line: `127.0.0.1:7070,[::1]:7070`.
    public var description: String { addresses.map(\.description).joined(separator: ",") }
}

/// An element of an address list that is not `HOST:PORT`: which one, and why.
public struct AddressListError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The whole list as given.
    public var text: String
    /// The element at fault, as written (spaces trimmed).
    public var element: String
    /// Its position in the list, from 1.
    public var position: Int
    /// How many elements the list has.
    public var count: Int
    public var reason: String
    /// The element is a well-formed address with port 0.
    public var portIsZero: Bool

    public var description: String {
        let which = count > 1 ? "address \(position) of \(count)" : "the address"
        return element.isEmpty ? "\(which) is empty: expected HOST:PORT, or several as HOST:PORT,HOST:PORT"
                               : "\(which), '\(element)', is not HOST:PORT: \(reason)"
    }
}

extension Substring {
    var trimmingSpaces: String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
