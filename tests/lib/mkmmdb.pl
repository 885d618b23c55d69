#!/usr/bin/perl
# mkmmdb.pl DIR - write two tiny MaxMind DB files for tests into DIR:
#   DIR/country.mmdb  (database_type sandgate-test-Country, GeoIP2 layout)
#   DIR/asn.mmdb      (database_type sandgate-test-ASN, GeoLite2-ASN layout)
# Test ranges only (RFC 2544, RFC 5737, RFC 3849), with user-assigned
# country codes (ISO 3166-1 reserves XA-XZ and ZZ for private use):
#   198.18.0.0/24     country ZZ  AS64500
#   198.18.1.0/24     country XY  (no AS)
#   198.18.2.0/24     (no country) AS64501
#   198.51.100.0/24   country XY  AS64501
#   192.0.2.0/24      (no country) AS64502
#   203.0.113.0/24    registered_country ZZ only  AS64502
#   2001:db8:1::/48   country ZZ  AS64500
#   127.0.0.0/8       country XL  AS64510   (loopback: end-to-end tests
#   127.0.0.2/32      country XQ  AS64511    through the gateway)
# Needs Debian's libmaxmind-db-writer-perl. Exit 77 (skip) without it.
use strict;
use warnings;

my $dir = shift or die "usage: $0 DIR\n";
eval { require MaxMind::DB::Writer::Tree; 1 }
	or do { print "needs libmaxmind-db-writer-perl (MaxMind::DB::Writer::Tree)\n"; exit 77 };

my %types = (
	country => 'map',
	registered_country => 'map',
	iso_code => 'utf8_string',
	autonomous_system_number => 'uint32',
	autonomous_system_organization => 'utf8_string',
);

sub tree {
	my ($type) = @_;
	return MaxMind::DB::Writer::Tree->new(
		ip_version => 6,
		record_size => 24,
		# the writer drops reserved ranges by default: ours are all test ranges
		remove_reserved_networks => 0,
		database_type => $type,
		languages => ['en'],
		description => { en => "sandgate test data ($type)" },
		map_key_type_callback => sub { $types{ $_[0] } },
	);
}

sub write_tree {
	my ($t, $path) = @_;
	open my $fh, '>:raw', $path or die "$path: $!\n";
	$t->write_tree($fh);
	close $fh or die "$path: $!\n";
}

my $c = tree('sandgate-test-Country');
$c->insert_network('198.18.0.0/24', { country => { iso_code => 'ZZ' } });
$c->insert_network('198.18.1.0/24', { country => { iso_code => 'XY' } });
$c->insert_network('198.51.100.0/24', { country => { iso_code => 'XY' } });
$c->insert_network('203.0.113.0/24', { registered_country => { iso_code => 'ZZ' } });
$c->insert_network('2001:db8:1::/48', { country => { iso_code => 'ZZ' } });
$c->insert_network('127.0.0.0/8', { country => { iso_code => 'XL' } });
$c->insert_network('127.0.0.2/32', { country => { iso_code => 'XQ' } });
write_tree($c, "$dir/country.mmdb");

my $a = tree('sandgate-test-ASN');
$a->insert_network('198.18.0.0/24', { autonomous_system_number => 64500,
				       autonomous_system_organization => 'Test One' });
$a->insert_network('198.18.2.0/24', { autonomous_system_number => 64501 });
$a->insert_network('198.51.100.0/24', { autonomous_system_number => 64501 });
$a->insert_network('192.0.2.0/24', { autonomous_system_number => 64502 });
$a->insert_network('203.0.113.0/24', { autonomous_system_number => 64502 });
$a->insert_network('2001:db8:1::/48', { autonomous_system_number => 64500 });
$a->insert_network('127.0.0.0/8', { autonomous_system_number => 64510 });
$a->insert_network('127.0.0.2/32', { autonomous_system_number => 64511 });
write_tree($a, "$dir/asn.mmdb");
