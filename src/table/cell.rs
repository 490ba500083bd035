//! A Table's vocabulary: columns, cells and rows, as kube-apiserver's
//! printers make them (`metav1.TableColumnDefinition`, `TableRow`), and a
//! cell's text at a given instant.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::SystemTime;

use serde::Deserialize;

use super::duration;

/// A `TableColumnDefinition`: a built-in printer's, written in the code; a
/// custom resource's, read from its definition.
#[derive(Debug, Clone)]
pub struct Column {
    /// `name`: the header kubectl prints, upper-cased.
    pub name: Cow<'static, str>,
    /// `type`: `string`, `integer`, `number`, `boolean` or `date`.
    pub ty: Cow<'static, str>,
    /// `format`: `name` for the column kubectl uses as the object's name.
    pub format: Cow<'static, str>,
    /// `description`: the field's API documentation.
    pub description: Cow<'static, str>,
    /// `priority`: 0, or more for the columns kubectl shows with `-o wide`.
    pub priority: i32,
}

/// `metav1.ObjectMeta`'s documentation of `name` (Kubernetes 1.36).
pub const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// `metav1.ObjectMeta`'s documentation of `creationTimestamp` (Kubernetes 1.36).
pub const CREATED_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

impl Column {
    /// A built-in printer's column.
    const fn of(
        name: &'static str,
        format: &'static str,
        description: &'static str,
        priority: i32,
    ) -> Column {
        Column {
            name: Cow::Borrowed(name),
            ty: Cow::Borrowed("string"),
            format: Cow::Borrowed(format),
            description: Cow::Borrowed(description),
            priority,
        }
    }

    /// The `Name` column every printer starts with.
    pub const fn name() -> Column {
        Column::of("Name", "name", NAME_DOC, 0)
    }

    /// The `Name` column, shown only with `-o wide` (events').
    pub const fn wide_name() -> Column {
        Column::of("Name", "name", NAME_DOC, 1)
    }

    /// The `Age` column.
    pub const fn age() -> Column {
        Column::text("Age", CREATED_DOC)
    }

    /// A string column.
    pub const fn text(name: &'static str, description: &'static str) -> Column {
        Column::of(name, "", description, 0)
    }

    /// A string column shown only with `-o wide` (priority 1).
    pub const fn wide(name: &'static str, description: &'static str) -> Column {
        Column::of(name, "", description, 1)
    }

    /// An `integer` column.
    pub const fn int(name: &'static str, description: &'static str) -> Column {
        Column::typed(name, "integer", description)
    }

    /// A column of another `type` (`boolean`, `number`), priority 0.
    pub const fn typed(name: &'static str, ty: &'static str, description: &'static str) -> Column {
        Column {
            name: Cow::Borrowed(name),
            ty: Cow::Borrowed(ty),
            format: Cow::Borrowed(""),
            description: Cow::Borrowed(description),
            priority: 0,
        }
    }
}

/// A cell's text.
pub type Text = Box<str>;

/// One cell of a row, as printed or as the instant to print from.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// A string.
    Text(Text),
    /// An integer.
    Int(i64),
    /// A number (a custom resource's `number` column).
    Float(f64),
    /// A boolean (a custom resource's `boolean` column).
    Bool(bool),
    /// No value: `null` (a custom resource's column its path finds nothing at).
    Null,
    /// How long ago an instant was (`translateTimestampSince`);
    /// `<unknown>` without one.
    Since(Option<SystemTime>),
    /// A restart count, and when the last restart was, if any: `3`, or
    /// `3 (5m ago)`.
    Restarts {
        /// The restarts.
        count: i64,
        /// When the last one ended, if any.
        last: Option<SystemTime>,
    },
}

/// A `TableRowCondition` of type `Completed`, status `True`.
#[derive(Debug, PartialEq)]
pub struct RowCondition {
    /// `reason`.
    pub reason: &'static str,
    /// `message`.
    pub message: &'static str,
}

/// One object's row, made when it is first asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The cells, one per column, wide ones included.
    pub cells: Vec<Cell>,
    /// The row's condition (pods that have ended).
    pub condition: Option<&'static RowCondition>,
}

impl Row {
    /// The cells as kube-apiserver writes them at `now`, as text (for tests
    /// and for kubectl-like output).
    pub fn texts(&self, now: SystemTime) -> Vec<String> {
        self.cells
            .iter()
            .map(|c| {
                let mut s = String::new();
                cell_text(c, now, &mut s);
                s
            })
            .collect()
    }
}

/// An RFC 3339 instant as the API writes them (`metav1.Time`); `None` for
/// anything else, which prints as the zero time does.
pub fn parse_time(s: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339(s).ok()
}

/// A cell's text at `now`, as the apiserver writes it.
pub fn cell_text(c: &Cell, now: SystemTime, out: &mut String) {
    match c {
        Cell::Text(t) => out.push_str(t),
        Cell::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Cell::Float(f) => {
            let _ = write!(out, "{f}");
        }
        Cell::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Cell::Null => {}
        Cell::Since(None) => out.push_str("<unknown>"),
        Cell::Since(Some(t)) => duration::human(duration::seconds_between(*t, now), out),
        Cell::Restarts { count, last } => {
            let _ = write!(out, "{count}");
            if let Some(t) = last {
                out.push_str(" (");
                duration::human(duration::seconds_between(*t, now), out);
                out.push_str(" ago)");
            }
        }
    }
}

/// The metadata every printer reads, borrowed from the object's JSON.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct Meta<'a> {
    /// `name`.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    /// `creationTimestamp`.
    #[serde(borrow)]
    pub creation_timestamp: Option<Cow<'a, str>>,
    /// `deletionTimestamp`: set while the object is being deleted.
    #[serde(borrow)]
    pub deletion_timestamp: Option<Cow<'a, str>>,
}

impl Meta<'_> {
    /// The `Name` cell.
    pub fn name(&self) -> Cell {
        Cell::Text(Text::from(&*self.name))
    }

    /// The `Age` cell.
    pub fn age(&self) -> Cell {
        Cell::Since(self.creation_timestamp.as_deref().and_then(parse_time))
    }
}
