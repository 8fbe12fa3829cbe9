import ArgumentParser
import PushWire

/// A name given on the command line, checked as the protocol checks it ([3.3-8]): 1 to its
/// field's maximum of bytes, without a control character. The failure names the option.
func checkIdentifier(_ value: String, as kind: Identifier.Kind, _ option: String) throws(ValidationError) {
    do throws(IdentifierError) {
        try Identifier.check(value, as: kind)
    } catch {
        throw ValidationError("\(option): \(error)")
    }
}

/// `--to KIND:NAME`, whose name is an identifier of its kind: a bad one is refused with the
/// reason, not as a value the parser could not read.
func parseTarget(_ text: String) throws -> PushTarget {
    guard let colon = text.firstIndex(of: ":"), ["user", "device", "tag"].contains(text[..<colon]) else {
        throw ValidationError("a target is user:NAME, device:ID or tag:T")
    }
    let name = String(text[text.index(after: colon)...])
    let target: PushTarget = switch text[..<colon] {
    case "user": .user(name)
    case "device": .device(name)
    default: .tag(name)
    }
    try checkIdentifier(name, as: target.identifierKind, "--to")
    return target
}

extension PushTarget {
    /// What kind of identifier its name is.
    var identifierKind: Identifier.Kind {
        switch self {
        case .user: .user
        case .device: .deviceID
        case .tag: .tag
        }
    }
}
