import PushWire

/// Which role may send which request ([4.1-3]): devices read, providers write, and a
/// gateway only reads the device registry. Checked after the body and before the service
/// ([4.1-5]), by every server alike.
public enum RolePolicy {
    public static func allows(_ type: MessageType, from role: PeerRole) -> Bool {
        switch type {
        case .store, .send, .recall, .status, .keys, .push: role == .provider
        case .login, .fetch, .sync, .ack: role == .device
        case .registry: role == .gateway
        default: true
        }
    }
}
