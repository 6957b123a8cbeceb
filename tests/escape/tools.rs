//! Escape suite, tools: the commands that reach files by routes a userspace path checker tends
//! not to model (in-place editors, copies, moves, xargs, find, dd, tar, interpreters).
use fp_tests::{Expect::Allowed, Suite, denied, escape_suite};

const SUITE: Suite = Suite {
    name: "escape-tools",
    setup: r#"
mkdir -p $B/open/src/secret
echo open > $B/open/f
echo replaced > $B/open/src/secret/tar_extract_over
tar -C $B/open/src -cf $B/open/t.tar secret/tar_extract_over
"#,
    ..Suite::PLAIN
};

escape_suite! {
    setup = SUITE;
    sed_in_place: denied("file_open", "read", "secret/sed_in_place") => "sed -i s/secret/public/ $B/secret/sed_in_place";
    cp_over: denied("file_open", "write", "secret/cp_over") => "cp $B/open/f $B/secret/cp_over";
    cp_out: denied("file_open", "read", "secret/cp_out") => "cp $B/secret/cp_out $B/open/cp_out";
    mv_out: denied("path_rename", "delete", "secret/mv_out") => "mv $B/secret/mv_out $B/open/mv_out";
    xargs_rm: denied("path_unlink", "delete", "secret/xargs_rm") => "echo $B/secret/xargs_rm | xargs rm -f";
    find_delete: denied("file_open", "read", "secret") => "find $B/secret -name find_delete -delete";
    dd_of: denied("file_open", "write", "secret/dd_of") => "dd if=/dev/zero of=$B/secret/dd_of count=1 status=none";
    tar_extract_over: denied("file_open", "write", "secret/tar_extract_over") => "tar --overwrite -C $B -xf $B/open/t.tar";
    python_open: denied("file_open", "read", "secret/python_open") => "python3 -c \"open('$B/secret/python_open').read()\"";
    perl_open: denied("file_open", "read", "secret/perl_open") => "perl -e 'open(my $f, \"<\", $ARGV[0]) or die \"$!\\n\"' $B/secret/perl_open";
    awk_in_place: denied("file_open", "read", "secret/awk_in_place") => "gawk -i inplace '{print}' $B/secret/awk_in_place";
    shell_append: denied("file_open", "write", "secret/shell_append") => "echo x >> $B/secret/shell_append";
    tools_work_outside: Allowed => "cd $B/open && sed -i s/open/edited/ f && cp f g && mv g h && echo $B/open/h | xargs rm && dd if=/dev/zero of=z count=1 status=none && find . -name z -delete && python3 -c \"open('f').read()\" && perl -e 'open(my $f, \"<\", \"f\") or die' && gawk -i inplace '{print}' f";
}
