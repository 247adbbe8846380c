function s = getDateString()
% Stand-in for k-Wave's getDateString, whose datetime call Octave lacks.
  s = datestr(now, 'dd-mmm-yyyy-HH-MM-SS');
end
