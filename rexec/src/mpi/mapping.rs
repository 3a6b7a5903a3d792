//! `PMI_process_mapping`: which ranks share a node, in MPICH's vector form
//! `(vector,(first_node,node_count,ranks_per_node),...)`. Each block gives `ranks_per_node`
//! consecutive ranks to each of `node_count` nodes numbered from `first_node`; nodes are
//! numbered in the order their first rank appears. MPI libraries use it to let ranks on
//! one node talk through shared memory and ranks on different nodes over the network.

/// The mapping of ranks placed on `nodes` (node name by rank).
///
/// ```
/// use rexec::mpi::mapping::process_mapping;
/// let by_rank = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
/// assert_eq!(process_mapping(&by_rank(&["a", "a", "b", "b"])), "(vector,(0,2,2))");
/// assert_eq!(process_mapping(&by_rank(&["a", "b", "c", "a"])), "(vector,(0,3,1),(0,1,1))");
/// ```
pub fn process_mapping(nodes: &[String]) -> String {
    let mut ids: Vec<&str> = Vec::new();
    // Runs of consecutive ranks on one node: (node id, ranks).
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for name in nodes {
        let id = match ids.iter().position(|n| n == name) {
            Some(id) => id,
            None => {
                ids.push(name);
                ids.len() - 1
            }
        };
        match runs.last_mut() {
            Some((last, count)) if *last == id => *count += 1,
            _ => runs.push((id, 1)),
        }
    }
    // Blocks: runs of equal size on consecutive node ids merge.
    let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
    for (id, count) in runs {
        match blocks.last_mut() {
            Some((first, nodes, per)) if *per == count && *first + *nodes == id => *nodes += 1,
            _ => blocks.push((id, 1, count)),
        }
    }
    let mut text = String::from("(vector");
    for (first, nodes, per) in blocks {
        text.push_str(&format!(",({first},{nodes},{per})"));
    }
    text.push(')');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn one_node_is_one_block() {
        assert_eq!(process_mapping(&names(&["a"; 4])), "(vector,(0,1,4))");
    }

    #[test]
    fn round_robin_over_three_nodes() {
        assert_eq!(
            process_mapping(&names(&["n1", "n2", "n3", "n1", "n2", "n3"])),
            "(vector,(0,3,1),(0,3,1))"
        );
    }

    #[test]
    fn uneven_blocks_stay_apart() {
        assert_eq!(
            process_mapping(&names(&["a", "a", "b", "c", "c"])),
            "(vector,(0,1,2),(1,1,1),(2,1,2))"
        );
    }
}
