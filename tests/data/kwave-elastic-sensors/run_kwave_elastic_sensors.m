% k-Wave's pstdElastic2D with Cartesian sensor points (CartInterp 'nearest' and 'linear') and
% intensity records, on the case of tests/physics/test_elastic_cartesian.py::test_against_kwave
% (GNU Octave, double precision).
%   python tests/physics/test_elastic_cartesian.py --inputs DIR     (writes DIR/in_sensors.mat)
%   cd DIR && octave-cli run_kwave_elastic_sensors.m                (k-Wave's folder on the path)
%   python tests/physics/test_elastic_cartesian.py --reference DIR  (writes sensors.npz here)
1;
function t = datetime(varargin)
  t = now;
end
function s = seconds(d)
  s = d * 86400;
end

d = load('in_sensors.mat');
s = double(d.shape);
kgrid = kWaveGrid(s(1), d.dx, s(2), d.dx);
kgrid.setTime(double(d.Nt), d.dt);
medium = struct('sound_speed_compression', d.cp, 'sound_speed_shear', d.cs, 'density', d.rho);
source = struct('p0', d.p0);
sensor = struct('mask', d.points);
sensor.record = {'p', 'p_max', 'u', 'u_rms', 'I', 'I_avg'};
for interp = {'nearest', 'linear'}
  out = pstdElastic2D(kgrid, medium, source, sensor, 'PlotSim', false, ...
                      'PMLSize', double(d.pml), 'PMLAlpha', 2, 'CartInterp', interp{1});
  save('-v7', ['out_' interp{1} '.mat'], '-struct', 'out');
end
