import KernelKeychain

extension SecretService {
    /// The properties of an object in one interface, in the order introspection lists them.
    func properties(of object: Object, interface: String) throws(BusError) -> [(String, PropertyValue)] {
        switch (object, interface) {
        case (.service, Self.serviceInterface):
            return [("Collections", .objectPaths(store.collectionNames.map(SecretPath.collection)))]
        case (.collection(let name), Self.collectionInterface):
            let record = store.collection(name)
            // Without the index (the vault locked since the daemon started) there is nothing to list.
            let items = store.index == nil ? [] : try store.items(in: name, matching: [:])
            return [
                ("Items", .objectPaths(items.map(itemPath))),
                ("Label", .string(record?.label ?? name)),
                // Locked while any of its secrets cannot be read: what Unlock could not open.
                ("Locked", .bool(store.isLocked(collection: name) || items.contains(where: \.locked))),
                ("Created", .uint64(record?.created ?? 0)),
                ("Modified", .uint64(record?.modified ?? 0)),
            ]
        case (.item(let item), Self.itemInterface):
            return [
                ("Locked", .bool(try withCurrentLock(item, path: itemPath(item)).locked)),
                ("Attributes", .attributes(item.attributes)),
                ("Label", .string(item.record?.label ?? SecretStore.defaultLabel(item.id))),
                ("Type", .string(item.attributes["xdg:schema"] ?? "")),
                ("Created", .uint64(store.times(of: item).created)),
                ("Modified", .uint64(store.times(of: item).modified)),
            ]
        case (_, ""):
            // No interface named: every interface's properties (as GetAll allows).
            switch object {
            case .service: return try properties(of: object, interface: Self.serviceInterface)
            case .collection: return try properties(of: object, interface: Self.collectionInterface)
            case .item: return try properties(of: object, interface: Self.itemInterface)
            default: return []
            }
        case (_, Self.sessionInterface), (_, Self.promptInterface):
            return []
        default:
            throw .invalidArguments("this object has no interface '\(interface)'")
        }
    }

    func setProperty(of object: Object, interface: String, _ property: String, _ value: PropertyValue) throws(BusError) {
        switch (object, interface, property, value) {
        case (.collection(let name), Self.collectionInterface, "Label", .string(let label)):
            try store.setCollectionLabel(name, label)
            emitPropertiesChanged(SecretPath.collection(name), Self.collectionInterface, changed: ["Label"])
            emit(SecretPath.service, Self.serviceInterface, "CollectionChanged") { $0.objectPath(SecretPath.collection(name)) }
        case (.item(let item), Self.itemInterface, "Label", .string(let label)):
            _ = try store.update(item, label: label)
            itemChanged(item, "Label")
        case (.item(let item), Self.itemInterface, "Attributes", .attributes(let attributes)):
            _ = try store.update(item, attributes: attributes)
            itemChanged(item, "Attributes")
        case (_, _, "Label", _), (_, _, "Attributes", _):
            throw .invalidArguments("\(property) takes \(property == "Label" ? "a string (s)" : "a{ss}")")
        default:
            let known = (try? properties(of: object, interface: interface))?.contains { $0.0 == property } ?? false
            throw known ? .readOnlyProperty("\(interface).\(property)") : .unknownProperty("\(interface).\(property)")
        }
    }

    private func itemChanged(_ item: SecretStore.Found, _ property: String) {
        let path = itemPath(item)
        emitPropertiesChanged(path, Self.itemInterface, changed: [property])
        emit(SecretPath.collection(item.collection), Self.collectionInterface, "ItemChanged") { $0.objectPath(path) }
    }
}
