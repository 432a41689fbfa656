

/// The bridge's own inode numbers. Key serials are not used: the kernel reuses them,
/// and a service or an item that does not exist yet (a file being created) has none.
/// Numbers are never reused; an entry is dropped when the kernel forgets its last lookup.
final class InodeTable: Sendable {
    static let rootNumber: UInt64 = 1

    private struct Entry {
        var node: Node
        var lookups: UInt64
    }

    private struct State {
        var numbers: [Node: UInt64] = [.root: InodeTable.rootNumber]
        var entries: [UInt64: Entry] = [InodeTable.rootNumber: Entry(node: .root, lookups: 1)]
        var next: UInt64 = InodeTable.rootNumber + 1
    }

    private let state = Locked(State())

    func node(_ number: UInt64) -> Node? {
        state.withLock { $0.entries[number]?.node }
    }

    /// The node's number for a reply that the kernel counts as a lookup (lookup,
    /// create, mkdir): the count goes up by one.
    func remember(_ node: Node) -> UInt64 {
        state.withLock { state in
            let number = Self.number(for: node, in: &state)
            state.entries[number]?.lookups += 1
            return number
        }
    }

    /// The node's number without counting a lookup (readdir).
    func peek(_ node: Node) -> UInt64 {
        state.withLock { state in Self.number(for: node, in: &state) }
    }

    /// The kernel dropped `count` lookups of the number.
    func forget(_ number: UInt64, count: UInt64) {
        guard number != Self.rootNumber else { return }
        state.withLock { state in
            guard var entry = state.entries[number] else { return }
            entry.lookups = entry.lookups > count ? entry.lookups - count : 0
            if entry.lookups == 0 {
                state.entries[number] = nil
                if state.numbers[entry.node] == number { state.numbers[entry.node] = nil }
            } else {
                state.entries[number] = entry
            }
        }
    }

    /// After a rename the source's number names the target, as the kernel's dentry does.
    func renamed(_ source: Node, to target: Node) {
        state.withLock { state in
            guard let number = state.numbers[source] else { return }
            state.numbers[source] = nil
            state.numbers[target] = number
            state.entries[number]?.node = target
        }
    }

    /// After a removal (rmdir) the name no longer leads to the number: a node made again
    /// under it gets a new one. The kernel keeps the removed inode, dead (a removed
    /// directory takes no new entry), for as long as a process holds it (a shell's
    /// working directory, an open handle); answering the new folder with its number
    /// would make the new folder that dead one. The entry itself stays until the
    /// kernel forgets its lookups.
    func detach(_ node: Node) {
        state.withLock { state in _ = state.numbers.removeValue(forKey: node) }
    }

    private static func number(for node: Node, in state: inout State) -> UInt64 {
        if let number = state.numbers[node] { return number }
        let number = state.next
        state.next += 1
        state.numbers[node] = number
        state.entries[number] = Entry(node: node, lookups: 0)
        return number
    }
}
