//! `topo-tune completions SHELL` and `topo-tune man`: made from the same clap definition as
//! `--help`, so they never disagree with it.

use super::Done;
use crate::cli::Cli;
use crate::error::Error;
use crate::exit;
use clap::CommandFactory;

pub(crate) fn completions(shell: clap_complete::Shell) -> Done {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "topo-tune", &mut out);
    Done {
        text: String::from_utf8_lossy(&out).into_owned(),
        exit_code: exit::OK,
    }
}

/// The manual page: the top level with every subcommand's options under its own section.
pub(crate) fn man() -> Result<Done, Error> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    let io = |e: std::io::Error| Error::Io {
        what: "rendering the manual page".into(),
        source: e,
    };
    let page = clap_mangen::Man::new(cmd.clone());
    page.render_title(&mut out).map_err(io)?;
    page.render_name_section(&mut out).map_err(io)?;
    page.render_synopsis_section(&mut out).map_err(io)?;
    page.render_description_section(&mut out).map_err(io)?;
    page.render_options_section(&mut out).map_err(io)?;
    page.render_subcommands_section(&mut out).map_err(io)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name().to_string();
        out.extend_from_slice(format!(".SH \"TOPO-TUNE {}\"\n", name.to_uppercase()).as_bytes());
        let sub_page = clap_mangen::Man::new(sub.clone().name(format!("topo-tune {name}")));
        sub_page.render_synopsis_section(&mut out).map_err(io)?;
        sub_page.render_description_section(&mut out).map_err(io)?;
        sub_page.render_options_section(&mut out).map_err(io)?;
    }
    out.extend_from_slice(
        b".SH \"EXIT STATUS\"\n0 success; 2 usage; 3 changes pending (--check, --dry-run); 4 some nodes failed; 5 doctor: a check failed; 6 status: drift; 7 apply: halted; 8 no node succeeded; 65-77 input, system and permission errors (sysexits); 130/143 interrupted. The full list: docs/exit-codes.md.\n",
    );
    page.render_version_section(&mut out).map_err(io)?;
    Ok(Done {
        text: String::from_utf8_lossy(&out).into_owned(),
        exit_code: exit::OK,
    })
}
