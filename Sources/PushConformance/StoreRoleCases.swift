import PushWire

/// Roles and services at the store (section 4.1): who may send what, and in which
/// order the store checks a request.
extension StoreCases {
    static let roles: [ConformanceCase] = [
        ConformanceCase("store.device-forbidden", clause: "4.1-3", "STORE, RECALL, STATUS and PUSH from a device are FORBIDDEN") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            try Expect.refused(session, .store(StoreRequest(user: ctx.unique("user"), payload: [1])), .forbidden, "STORE from a device")
            try Expect.refused(session, .recall(Recall(id: PayloadID.random())), .forbidden, "RECALL from a device")
            try Expect.refused(session, .status(StatusRequest(id: PayloadID.random())), .forbidden, "STATUS from a device")
            try Expect.refused(session, .push(Push(target: .user(ctx.unique("user")), id: [1])), .forbidden, "PUSH from a device")
            return "all four FORBIDDEN"
        },

        ConformanceCase("store.provider-forbidden", clause: "4.1-3", "LOGIN, FETCH, SYNC and ACK from a provider are FORBIDDEN") { ctx throws(CaseStop) in
            let session = try ctx.storeProvider()
            try Expect.refused(session, .login(Login(user: ctx.unique("user"), password: [1], deviceID: "d")), .forbidden, "LOGIN from a provider")
            try Expect.refused(session, .fetch(Fetch(id: PayloadID.random(), token: [1])), .forbidden, "FETCH from a provider")
            try Expect.refused(session, .sync(Sync(token: [1])), .forbidden, "SYNC from a provider")
            try Expect.refused(session, .ack(Ack(id: PayloadID.random(), token: [1])), .forbidden, "ACK from a provider")
            return "all four FORBIDDEN"
        },

        ConformanceCase("store.push-not-served", clause: "4.1-4", "PUSH to the store is BAD_REQUEST") { ctx throws(CaseStop) in
            let session = try ctx.storeProvider()
            try Expect.refused(session, .push(Push(target: .user(ctx.unique("user")), id: [1])), .badRequest, "PUSH from a provider to the store")
            try session.expectAlive("BAD_REQUEST")
            return "BAD_REQUEST, connection open"
        },

        ConformanceCase("store.check-order", clause: "4.1-5", "body checks come before role checks, role before service") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let storeWithoutPayload = RawFrame.frame(.store, correlation: 201, body: RawFrame.field(.user, string: "u"))
            try Expect.refusedRaw(session, storeWithoutPayload, .badRequest, "a device's STORE without payload (body before role)")
            let pushWithBadPriority = RawFrame.frame(.push, correlation: 202, body: RawFrame.field(.id, [1]) + RawFrame.field(.targetKind, [2])
                + RawFrame.field(.target, string: "u") + RawFrame.field(.priority, [11]))
            try Expect.refusedRaw(session, pushWithBadPriority, .badRequest, "a device's PUSH with priority 11 (body before role)")
            try Expect.refused(session, .push(Push(target: .user("u"), id: [1])), .forbidden, "a device's valid PUSH (role before service)")
            return "malformed STORE and PUSH from a device → BAD_REQUEST; valid PUSH → FORBIDDEN"
        },

        ConformanceCase("store.role-fixed", clause: "4.1-2", "the role chosen in HELLO holds for the whole connection") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let credential = ctx.options.keys != nil ? try ctx.providerCredential(for: .store) : nil
            try Expect.refused(session, .hello(CaseContext.hello(.provider, credential: credential)), .badRequest, "a second HELLO as provider")
            try Expect.refused(session, .status(StatusRequest(id: PayloadID.random())), .forbidden, "STATUS after the provider HELLO was refused")
            try Expect.refused(session, .sync(Sync(token: nil)), .authRequired, "SYNC (a device request) without token")
            return "second HELLO as provider → BAD_REQUEST; still a device: STATUS FORBIDDEN, SYNC AUTH_REQUIRED"
        },
    ]
}
