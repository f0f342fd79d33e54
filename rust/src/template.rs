//! A plain shape's groups read in one left-to-right pass, for the shapes where the text
//! decides every choice by itself: most of a scan went to the bounded backtracker's
//! captures (about 1.5 µs a record, two thirds of the scan).
//!
//! A shape such as `Accepted: (?P<a>[0-9]{1,15}) tokens(?:, Drafted: (?P<d>[0-9]+))?$` is a
//! sequence of literals, named groups and optional parts. When
//! - every group is followed by a literal (or the end), and the bytes a group can hold
//!   (its alphabet) leave the group's end fixed: the first byte after the group's start
//!   that is not in its alphabet is the `skip`-th byte of the literal that follows it (the
//!   first of that literal not in the alphabet), so the group ends `skip` bytes before it;
//! - every optional part starts with a literal that neither is a prefix of nor has as a
//!   prefix any literal that may come in its place (so whether the part is there is read
//!   off the text, and once its literal is there, leaving the part out cannot match);
//!
//! then the regex matches a message exactly when this pass does, with the same groups:
//! each group's text is fixed by the bytes around it, and checked against the group's own
//! pattern (a small DFA, anchored at both ends). Any other shape has no template and keeps
//! the backtracker. `tests.rs` holds the two to the same answers on bent records.

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::{Anchored, Input};
use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// What comes after a group or in place of an optional part.
#[derive(Debug, Clone, PartialEq)]
enum Next {
    Lit(Vec<u8>),
    End,
}

#[derive(Debug)]
enum Node {
    Lit(Vec<u8>),
    Group(usize, Hir), // group index, its pattern
    Empty(usize),      // a group that matches nothing (the `__m` marker)
    Opt(Vec<Node>),
    End,
}

#[derive(Debug)]
enum Item {
    Lit(Vec<u8>),
    Empty(usize),
    Group {
        slot: usize,
        alphabet: Box<[bool; 256]>,
        skip: usize,
        dfa: Box<dense::DFA<Vec<u32>>>,
    },
    Opt {
        lead: Vec<u8>,
        body: Vec<Item>,
    },
    End,
}

/// A shape's template; `None` from [`Template::new`] when the shape is not of this kind.
#[derive(Debug)]
pub struct Template {
    items: Vec<Item>,
    slots: usize,
}

/// The shape is not one this pass can read with certainty.
struct Unsupported;

impl Template {
    /// The template of `pattern` (as the scanner compiles it: `^(?P<__m>)...$`), if the
    /// text decides every choice in it.
    pub fn new(pattern: &str) -> Option<Template> {
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(pattern)
            .ok()?;
        let slots = hir.properties().explicit_captures_len() + 1;
        let mut nodes = Vec::new();
        flatten(&hir, &mut nodes, true).ok()?;
        let items = compile(nodes, &[]).ok()?;
        Some(Template { items, slots })
    }

    /// The groups' spans (indexed as the regex numbers them; group 0 is not set) when the
    /// pattern matches `text` from its start, else `None`.
    pub fn captures(&self, text: &[u8], spans: &mut Vec<Option<(usize, usize)>>) -> bool {
        spans.clear();
        spans.resize(self.slots, None);
        run(&self.items, text, 0, spans).is_some()
    }
}

fn flatten(hir: &Hir, out: &mut Vec<Node>, top: bool) -> Result<(), Unsupported> {
    match hir.kind() {
        HirKind::Empty => Ok(()),
        HirKind::Literal(l) => {
            if let Some(Node::Lit(last)) = out.last_mut() {
                last.extend_from_slice(&l.0);
            } else {
                out.push(Node::Lit(l.0.to_vec()));
            }
            Ok(())
        }
        HirKind::Concat(parts) => parts.iter().try_for_each(|p| flatten(p, out, top)),
        HirKind::Look(Look::Start) if top && out.is_empty() => Ok(()),
        HirKind::Look(Look::End) => {
            out.push(Node::End);
            Ok(())
        }
        HirKind::Capture(c) if c.name.is_some() => {
            let index = c.index as usize;
            if matches!(c.sub.kind(), HirKind::Empty) {
                out.push(Node::Empty(index));
            } else if c.sub.properties().explicit_captures_len() == 0 {
                out.push(Node::Group(index, (*c.sub).clone()));
            } else {
                return Err(Unsupported);
            }
            Ok(())
        }
        HirKind::Repetition(r) if r.min == 0 && r.max == Some(1) && r.greedy => {
            let mut body = Vec::new();
            flatten(&r.sub, &mut body, false)?;
            match body.first() {
                Some(Node::Lit(lead)) if !lead.is_empty() => {
                    out.push(Node::Opt(body));
                    Ok(())
                }
                _ => Err(Unsupported),
            }
        }
        _ => Err(Unsupported),
    }
}

/// What may come first from `nodes` on, then `after` (what follows the sequence).
fn first(nodes: &[Node], after: &[Next]) -> Result<Vec<Next>, Unsupported> {
    let mut out = Vec::new();
    for node in nodes {
        match node {
            Node::Lit(b) => {
                out.push(Next::Lit(b.clone()));
                return Ok(out);
            }
            Node::End => {
                out.push(Next::End);
                return Ok(out);
            }
            Node::Empty(_) => {}
            Node::Group(..) => return Err(Unsupported), // a group right after another
            Node::Opt(body) => match body.first() {
                Some(Node::Lit(lead)) => out.push(Next::Lit(lead.clone())),
                _ => return Err(Unsupported),
            },
        }
    }
    out.extend_from_slice(after);
    Ok(out)
}

fn compile(nodes: Vec<Node>, after: &[Next]) -> Result<Vec<Item>, Unsupported> {
    // What may follow each group and optional part (a literal may come before a group).
    let follows: Vec<Vec<Next>> = (0..nodes.len())
        .map(|i| match nodes[i] {
            Node::Group(..) | Node::Opt(_) => first(&nodes[i + 1..], after),
            _ => Ok(Vec::new()),
        })
        .collect::<Result<_, _>>()?;
    let mut items = Vec::new();
    for (node, next) in nodes.into_iter().zip(follows) {
        items.push(match node {
            Node::Lit(b) => Item::Lit(b),
            Node::End => Item::End,
            Node::Empty(slot) => Item::Empty(slot),
            Node::Group(slot, sub) => {
                let mut alphabet = Box::new([false; 256]);
                letters(&sub, &mut alphabet)?;
                let skip = match next.as_slice() {
                    [Next::Lit(f)] => f
                        .iter()
                        .position(|&b| !alphabet[usize::from(b)])
                        .ok_or(Unsupported)?,
                    [] => return Err(Unsupported), // nothing after it: the end is free
                    several => {
                        for n in several {
                            if let Next::Lit(f) = n {
                                if f.first().is_none_or(|&b| alphabet[usize::from(b)]) {
                                    return Err(Unsupported);
                                }
                            }
                        }
                        0
                    }
                };
                let dfa = dense::Builder::new()
                    .configure(dense::Config::new().start_kind(StartKind::Anchored))
                    .build(&format!(r"(?:{sub})\z"))
                    .map_err(|_| Unsupported)?;
                Item::Group {
                    slot,
                    alphabet,
                    skip,
                    dfa: Box::new(dfa),
                }
            }
            Node::Opt(mut body) => {
                let Node::Lit(lead) = body.remove(0) else {
                    return Err(Unsupported);
                };
                for n in &next {
                    if let Next::Lit(f) = n {
                        if f.starts_with(&lead) || lead.starts_with(f) {
                            return Err(Unsupported);
                        }
                    }
                }
                Item::Opt {
                    lead,
                    body: compile(body, &next)?,
                }
            }
        });
    }
    Ok(items)
}

/// The bytes a group's pattern can match (ASCII only: a wider class has no template).
fn letters(hir: &Hir, set: &mut [bool; 256]) -> Result<(), Unsupported> {
    let mut add = |lo: u32, hi: u32| {
        if hi > 0x7f {
            return Err(Unsupported);
        }
        for b in lo..=hi {
            set[b as usize] = true;
        }
        Ok(())
    };
    match hir.kind() {
        HirKind::Empty => Ok(()),
        HirKind::Literal(l) => l.0.iter().try_for_each(|&b| add(b.into(), b.into())),
        HirKind::Class(Class::Unicode(c)) => c
            .ranges()
            .iter()
            .try_for_each(|r| add(r.start().into(), r.end().into())),
        HirKind::Class(Class::Bytes(c)) => c
            .ranges()
            .iter()
            .try_for_each(|r| add(r.start().into(), r.end().into())),
        HirKind::Repetition(r) => letters(&r.sub, set),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().try_for_each(|h| letters(h, set)),
        HirKind::Capture(c) => letters(&c.sub, set),
        HirKind::Look(_) => Err(Unsupported),
    }
}

fn run(
    items: &[Item],
    text: &[u8],
    mut at: usize,
    spans: &mut [Option<(usize, usize)>],
) -> Option<usize> {
    for item in items {
        match item {
            Item::Lit(b) => {
                if !text.get(at..)?.starts_with(b) {
                    return None;
                }
                at += b.len();
            }
            Item::End => {
                if at != text.len() {
                    return None;
                }
            }
            Item::Empty(slot) => *spans.get_mut(*slot)? = Some((at, at)),
            Item::Group {
                slot,
                alphabet,
                skip,
                dfa,
            } => {
                let rest = text.get(at..)?;
                let run = rest
                    .iter()
                    .position(|&b| !alphabet[usize::from(b)])
                    .unwrap_or(rest.len());
                let len = run.checked_sub(*skip)?;
                let input = Input::new(&rest[..len]).anchored(Anchored::Yes);
                if !matches!(dfa.try_search_fwd(&input), Ok(Some(_))) {
                    return None;
                }
                *spans.get_mut(*slot)? = Some((at, at + len));
                at += len;
            }
            Item::Opt { lead, body } => {
                if text.get(at..)?.starts_with(lead) {
                    at = run(body, text, at + lead.len(), spans)?;
                }
            }
        }
    }
    Some(at)
}
